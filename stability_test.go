package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeready/nodeready/checks"
	"github.com/nodeready/nodeready/internal/config"
	"github.com/nodeready/nodeready/internal/golden"
)

// The names docs/stability.md promises to keep: the agent's, written by TestAPINames from
// the code into testdata/api.golden; the kubectl plugin's, written by the plugin's own
// TestAPINames into its testdata; and all of them as the last release had them, in
// testdata/api-released.txt.
const (
	pluginAPINames   = "cmd/kubectl-nodeready/internal/plugin/testdata/api.golden"
	releasedAPINames = "testdata/api-released.txt"
)

// TestAPINames holds the stability promise (docs/stability.md). The names users and their
// tools match on (the label, taint and annotations, the condition and the reasons, the
// Events' controllers and the field managers, the environment variables, the kinds of
// check, the metrics and their labels, the plugin's commands, flags, columns, states and
// output fields) are listed from the code; the list must match testdata/api.golden; and
// every name added, removed or changed since the last release (testdata/api-released.txt)
// must be named, in backticks, in the Unreleased section of CHANGELOG.md.
//
// `go test . ./cmd/... -run TestAPINames -update` writes the lists from the code; when
// CHANGELOG.md has a release newer than the one testdata/api-released.txt names (its
// Unreleased section was just made a release), it also takes the names as released.
func TestAPINames(t *testing.T) {
	names := agentAPINames(t)
	golden.Assert(t, "api", strings.Join(names, "\n")+"\n")
	plugin, err := os.ReadFile(pluginAPINames)
	require.NoError(t, err, "go test ./cmd/... -run TestAPINames -update writes it")
	current := slices.Sorted(slices.Values(append(names, lines(string(plugin))...)))

	changelog, err := os.ReadFile("CHANGELOG.md")
	require.NoError(t, err)
	release, _ := changelogSections(string(changelog))
	releasedAs, released, err := readReleased(releasedAPINames)
	if updating() && (err != nil || releasedAs != release) {
		require.NoError(t, writeReleased(releasedAPINames, release, current))
		releasedAs, released, err = release, current, nil
	}
	require.NoError(t, err, "go test . -run TestAPINames -update writes it")
	require.Equal(t, release, releasedAs, "CHANGELOG.md's latest release is %s, but %s holds the names of %s: once the release's section is written, take its names as released with `go test . ./cmd/... -run TestAPINames -update`",
		release, releasedAPINames, releasedAs)
	for _, problem := range unnamedChanges(released, current, string(changelog)) {
		t.Error(problem)
	}
}

// TestUnnamedChanges: the rule of TestAPINames finds a name added, removed or changed
// (a metric's labels) that the Unreleased section does not name in backticks, and only
// those; a name in an older release's section or outside backticks does not count.
func TestUnnamedChanges(t *testing.T) {
	released := []string{"env CHECK_TIMEOUT", "metric nodeready_checks_total counter check,result", "reason Verified"}
	current := []string{"env CHECK_TIMEOUT", "env CLOCK_MAX_SKEW", "metric nodeready_checks_total counter check", "reason SharedFault"}
	changelog := func(unreleased string) string {
		return "# Changelog\n\n## [Unreleased]\n\n" + unreleased + "\n## [0.1.0] - 2026-12-01\n\n- `reason Verified`, `Verified`, `SharedFault`\n"
	}
	assert.Empty(t, unnamedChanges(released, released, changelog("")), "nothing changed")
	assert.Equal(t, []string{
		"env CLOCK_MAX_SKEW: added since the last release, and not named in backticks in CHANGELOG.md's Unreleased section",
		"metric nodeready_checks_total: changed (labels check,result -> check) since the last release, and not named in backticks in CHANGELOG.md's Unreleased section",
		"reason SharedFault: added since the last release, and not named in backticks in CHANGELOG.md's Unreleased section",
		"reason Verified: removed since the last release, and not named in backticks in CHANGELOG.md's Unreleased section",
	}, unnamedChanges(released, current, changelog("- CLOCK_MAX_SKEW and nodeready_checks_total, without backticks\n")))
	assert.Empty(t, unnamedChanges(released, current, changelog(
		"### Added\n\n- `CLOCK_MAX_SKEW=5s`; the condition's reason `SharedFault`.\n\n### Removed\n\n- The reason `Verified`; `nodeready_checks_total{check}` lost `result`.\n")))
	assert.Len(t, unnamedChanges(released, current, changelog("- `SharedFaultX`, `node-ready/Verified`, `XCLOCK_MAX_SKEW`\n")), 4, "part of a longer name is not the name")
}

// updating reports -update (internal/golden's flag).
func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

func lines(s string) []string {
	var out []string
	for l := range strings.Lines(s) {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// readReleased reads the names as released, and the release they are of.
func readReleased(path string) (release string, names []string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	release, ok := strings.CutPrefix(first, "# release: ")
	if !ok {
		return "", nil, fmt.Errorf("%s: the first line is not # release: <version>", path)
	}
	return release, lines(string(b)), nil
}

func writeReleased(path, release string, names []string) error {
	head := "# release: " + release + "\n" +
		"# The API names (docs/stability.md) as CHANGELOG.md's latest release has them (none: before the first release,\n" +
		"# the names when this list began). Written by `go test . ./cmd/... -run TestAPINames -update` when a release is made.\n"
	return os.WriteFile(path, []byte(head+strings.Join(names, "\n")+"\n"), 0o644)
}

// changelogSections returns CHANGELOG.md's latest release, as v0.1.0 ("none" before the
// first), and its Unreleased section.
func changelogSections(changelog string) (release, unreleased string) {
	release = "none"
	var in bool
	var b strings.Builder
	for l := range strings.Lines(changelog) {
		if strings.HasPrefix(l, "## [") {
			heading := strings.TrimPrefix(l, "## [")
			version, _, _ := strings.Cut(heading, "]")
			if version == "Unreleased" {
				in = true
				continue
			}
			if in || release == "none" {
				in = false
				if release == "none" {
					release = "v" + strings.TrimPrefix(version, "v")
				}
			}
			continue
		}
		if in {
			b.WriteString(l)
		}
	}
	return release, b.String()
}

// unnamedChanges lists each API name added, removed or changed between released and
// current (lines of "kind name detail") that the Unreleased section of changelog does not
// name in backticks.
func unnamedChanges(released, current []string, changelog string) []string {
	_, unreleased := changelogSections(changelog)
	var spans []string
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(unreleased, -1) {
		spans = append(spans, m[1])
	}
	named := func(name string) bool {
		// The name whole, not part of a longer one: no name character either side.
		re := regexp.MustCompile(`(^|[^A-Za-z0-9_./-])` + regexp.QuoteMeta(name) + `($|[^A-Za-z0-9_./-])`)
		return slices.ContainsFunc(spans, re.MatchString)
	}
	key := func(line string) (kindName, detail string) {
		f := strings.SplitN(line, " ", 3)
		for len(f) < 3 {
			f = append(f, "")
		}
		return f[0] + " " + f[1], f[2]
	}
	before, after := map[string][]string{}, map[string][]string{}
	for _, l := range released {
		k, d := key(l)
		before[k] = append(before[k], d)
	}
	for _, l := range current {
		k, d := key(l)
		after[k] = append(after[k], d)
	}
	var problems []string
	for _, k := range slices.Sorted(slices.Values(slices.Compact(slices.Sorted(mapsKeys(before, after))))) {
		b, a := before[k], after[k]
		var what string
		switch {
		case b == nil:
			what = "added"
		case a == nil:
			what = "removed"
		case !slices.Equal(b, a):
			if strings.HasPrefix(k, "metric ") && len(a) == 1 && len(b) == 1 {
				what = fmt.Sprintf("changed (labels %s -> %s)", lastField(b[0]), lastField(a[0]))
			} else {
				what = fmt.Sprintf("changed (%s -> %s)", strings.Join(b, "; "), strings.Join(a, "; "))
			}
		default:
			continue
		}
		_, name, _ := strings.Cut(k, " ")
		if !named(name) {
			problems = append(problems, fmt.Sprintf("%s: %s since the last release, and not named in backticks in CHANGELOG.md's Unreleased section", k, what))
		}
	}
	return problems
}

func mapsKeys(ms ...map[string][]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for _, m := range ms {
			for k := range m {
				if !yield(k) {
					return
				}
			}
		}
	}
}

func lastField(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 {
		return "none"
	}
	return f[len(f)-1]
}

// agentAPINames lists the agent's API names, one "kind name detail" line each, sorted:
// internal/wellknown's words, the environment variables, the kinds of check and the
// metrics.
func agentAPINames(t *testing.T) []string {
	t.Helper()
	names := wellknownNames(t)
	add := func(kind, name, detail string) {
		names = append(names, strings.TrimSpace(kind+" "+name+" "+detail))
	}
	vars := map[string]bool{}
	for _, v := range config.Variables() {
		vars[v.Name] = true
		add("env", v.Name, "")
	}
	// kube-node-ready's variables that nodeready reads only to take or refuse them.
	for _, v := range config.KubeNodeReadyVariables {
		if !vars[v.Name] {
			add("env", v.Name, "kube-node-ready "+string(v.Handling))
		}
	}
	for _, k := range checks.Catalog {
		kind := "check"
		if k.Gate {
			kind = "gate"
		}
		add("check", string(k.Name), kind)
	}
	names = append(names, metricNames(t)...)
	slices.Sort(names)
	return slices.Compact(names)
}

// wellknownNames lists the words of internal/wellknown: its exported string constants by
// their value, and what each exported func(label string) string names for the default
// verified label (the annotations and labels named after it). The package is type-checked
// from its source, over the export data `go list -export` gives of what it imports, so a
// constant made of others counts by its value.
func wellknownNames(t *testing.T) []string {
	t.Helper()
	const path = "github.com/nodeready/nodeready/internal/wellknown"
	out, err := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}", path).Output()
	require.NoError(t, err, "go list -export %s", path)
	exports := map[string]string{}
	for _, l := range lines(string(out)) {
		p, file, _ := strings.Cut(l, "\t")
		exports[p] = file
	}
	fset := token.NewFileSet()
	var files []*ast.File
	paths, err := filepath.Glob("internal/wellknown/*.go")
	require.NoError(t, err)
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		require.NoError(t, err)
		files = append(files, f)
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", func(p string) (io.ReadCloser, error) {
		if exports[p] == "" {
			return nil, fmt.Errorf("no export data for %s", p)
		}
		return os.Open(exports[p])
	})}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Defs: map[*ast.Ident]types.Object{}, Uses: map[*ast.Ident]types.Object{}}
	pkg, err := conf.Check(path, fset, files, info)
	require.NoError(t, err)

	label := constant.StringVal(pkg.Scope().Lookup("VerifiedLabel").(*types.Const).Val())
	var names []string
	for _, name := range pkg.Scope().Names() {
		c, ok := pkg.Scope().Lookup(name).(*types.Const)
		if !ok || !c.Exported() || c.Val().Kind() != constant.String {
			continue
		}
		kind := "word"
		switch typ := c.Type().String(); {
		case strings.HasSuffix(typ, ".Reason"):
			kind = "reason"
		case strings.HasSuffix(typ, ".NodeConditionType"):
			kind = "condition"
		case strings.HasSuffix(name, "FieldManager"):
			kind = "field-manager"
		case strings.HasSuffix(name, "Controller"):
			kind = "event-controller"
		case strings.Contains(name, "Taint"):
			kind = "taint"
		case strings.HasSuffix(name, "Label"):
			kind = "label"
		case strings.HasSuffix(name, "LabelValue"), strings.HasSuffix(name, "Value"):
			kind = "label-value"
		}
		names = append(names, kind+" "+constant.StringVal(c.Val())+" "+name)
	}
	str := types.Typ[types.String]
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || !fd.Name.IsExported() {
				continue
			}
			sig := info.Defs[fd.Name].Type().(*types.Signature)
			if sig.Params().Len() != 1 || sig.Results().Len() != 1 || !types.Identical(sig.Params().At(0).Type(), str) || !types.Identical(sig.Results().At(0).Type(), str) {
				continue
			}
			kind := "name"
			switch {
			case strings.HasSuffix(fd.Name.Name, "Annotation"):
				kind = "annotation"
			case strings.HasSuffix(fd.Name.Name, "Label"):
				kind = "label"
			}
			param := sig.Params().At(0)
			var eval func(e ast.Expr) (string, bool)
			eval = func(e ast.Expr) (string, bool) {
				if tv := info.Types[e]; tv.Value != nil && tv.Value.Kind() == constant.String {
					return constant.StringVal(tv.Value), true
				}
				switch e := e.(type) {
				case *ast.ParenExpr:
					return eval(e.X)
				case *ast.Ident:
					return label, info.Uses[e] == param
				case *ast.BinaryExpr:
					x, okX := eval(e.X)
					y, okY := eval(e.Y)
					return x + y, e.Op == token.ADD && okX && okY
				}
				return "", false
			}
			var value string
			ok = len(fd.Body.List) == 1
			if ok {
				ret, isReturn := fd.Body.List[0].(*ast.ReturnStmt)
				ok = isReturn && len(ret.Results) == 1
				if ok {
					value, ok = eval(ret.Results[0])
				}
			}
			if !ok {
				t.Errorf("%s: wellknown.%s(label string) string is not `return label + a constant`, so TestAPINames cannot tell the name it returns: write it so", fset.Position(fd.Pos()), fd.Name.Name)
				continue
			}
			names = append(names, kind+" "+value+" "+fd.Name.Name)
		}
	}
	return names
}

// metricNames lists the metrics of the main module's code (agent/, and anywhere else but
// cmd/, e2e/ and tests): each prometheus.New<Metric>, <Metric>Vec, <Metric>Func or NewDesc
// call, by name, type and labels (variable and constant, sorted). A name or label that is
// not a string literal is an error: the list is read from the source.
func metricNames(t *testing.T) []string {
	t.Helper()
	var names []string
	fset := token.NewFileSet()
	literal := func(e ast.Expr) string {
		if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if s, err := strconv.Unquote(lit.Value); err == nil {
				return s
			}
		}
		t.Errorf("%s: a metric's name or label that is not a string literal: TestAPINames reads them from the source", fset.Position(e.Pos()))
		return ""
	}
	stringList := func(e ast.Expr) []string {
		var out []string
		if c, ok := e.(*ast.CompositeLit); ok {
			for _, el := range c.Elts {
				if kv, ok := el.(*ast.KeyValueExpr); ok {
					el = kv.Key // prometheus.Labels{"version": ...}
				}
				out = append(out, literal(el))
			}
		} else if id, ok := e.(*ast.Ident); !ok || id.Name != "nil" {
			literal(e)
		}
		return out
	}
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != "." && (strings.HasPrefix(d.Name(), ".") || slices.Contains([]string{"cmd", "e2e", "testdata", "bin", "charts", "manifests", "docs"}, p)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "prometheus" {
				return true
			}
			m := regexp.MustCompile(`^New(Counter|Gauge|Histogram|Summary|Untyped)(Vec|Func)?$`).FindStringSubmatch(sel.Sel.Name)
			var name, typ string
			var labels []string
			switch {
			case sel.Sel.Name == "NewDesc" && len(call.Args) == 4:
				name, typ = literal(call.Args[0]), "collector"
				labels = append(stringList(call.Args[2]), stringList(call.Args[3])...)
			case m != nil && len(call.Args) > 0:
				typ = strings.ToLower(m[1])
				opts, ok := call.Args[0].(*ast.CompositeLit)
				if !ok {
					t.Errorf("%s: the options of a metric are not a literal: TestAPINames reads them from the source", fset.Position(call.Pos()))
					return true
				}
				var ns, sub string
				for _, el := range opts.Elts {
					kv, ok := el.(*ast.KeyValueExpr)
					if !ok {
						continue
					}
					switch kv.Key.(*ast.Ident).Name {
					case "Namespace":
						ns = literal(kv.Value)
					case "Subsystem":
						sub = literal(kv.Value)
					case "Name":
						name = literal(kv.Value)
					case "ConstLabels":
						labels = append(labels, stringList(kv.Value)...)
					}
				}
				name = strings.Join(slices.DeleteFunc([]string{ns, sub, name}, func(s string) bool { return s == "" }), "_")
				if m[2] == "Vec" && len(call.Args) > 1 {
					labels = append(labels, stringList(call.Args[1])...)
				}
			default:
				return true
			}
			slices.Sort(labels)
			l := strings.Join(labels, ",")
			if l == "" {
				l = "-"
			}
			names = append(names, fmt.Sprintf("metric %s %s %s", name, typ, l))
			return true
		})
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, names, "no metric found: TestAPINames reads them from prometheus.New... calls")
	return names
}
