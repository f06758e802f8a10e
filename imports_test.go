package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/nodeready/nodeready"

// importRules are the dependency rules of DESIGN.md, by package (relative to the
// module; "" is main): the packages of this module each may import, and
// "prometheus" where it may use Prometheus. A package of the module that is not
// listed may import none of the module's.
var importRules = map[string][]string{
	"":                           {"agent", "internal/config", "internal/uninstall", "internal/wiring", "internal/wiring/sigterm", "prometheus"},
	"agent":                      {"checks", "nodepatch", "internal/config", "internal/kube", "internal/report", "internal/wellknown", "prometheus"},
	"checks":                     {"internal/envvar", "internal/kube"},
	"nodepatch":                  {"internal/kube", "internal/wellknown"},
	"internal/config":            {"checks", "internal/envvar", "internal/wellknown"},
	"internal/config/configtest": {"internal/config"},
	"internal/report":            {"internal/wellknown"},
	"internal/uninstall":         {"nodepatch", "internal/config", "internal/kube", "internal/wellknown"},
	// wiring builds the agent's clients, and the API server's endpoint as the
	// networkpolicy check dials it (checks.APIServerEndpoint): downward only.
	"internal/wiring": {"agent", "checks", "internal/config", "internal/kube"},
	// The tests' way to hand a client-go clientset to code written against kube.
	"internal/kube/adapt": {"internal/kube"},

	// The kubectl plugin: its command, and its logic in a package only the command
	// imports; it tells a startup taint as the agent does (nodepatch) and links no agent.
	"cmd/kubectl-nodeready":                 {"cmd/kubectl-nodeready/internal/plugin"},
	"cmd/kubectl-nodeready/internal/plugin": {"nodepatch", "internal/envvar", "internal/kube", "internal/wellknown"},
}

// TestImportRules fails on an import that breaks DESIGN.md's direction: main →
// agent → {checks, nodepatch}; config parses the environment, report tells, wellknown
// and envvar are leaves; checks and nodepatch never import agent or each other and
// never touch Prometheus; nothing imports k8s.io/kubernetes; and the agent's binary
// links no test-only tool, nothing of the kubectl plugin's (cmd/kubectl-nodeready,
// k8s.io/cli-runtime, cobra), and none of client-go's packages that register every
// API group (the typed clientset, its discovery and Events recorder): it speaks
// through internal/kube, and so does the plugin, whose binary links none of them
// either, nor cli-runtime's flags. `make vet` runs it.
func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...").Output()
	require.NoError(t, err)
	for line := range strings.Lines(strings.TrimSpace(string(out))) {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(strings.TrimPrefix(fields[0], module), "/")
		allowed := importRules[pkg]
		for _, imp := range fields[1:] {
			switch {
			case imp == module || strings.HasPrefix(imp, module+"/"):
				own := strings.TrimPrefix(strings.TrimPrefix(imp, module), "/")
				assert.True(t, slices.Contains(allowed, own), "%s imports %s: not in its rules (imports_test.go)", fields[0], imp)
			case strings.HasPrefix(imp, "github.com/prometheus/"):
				assert.True(t, slices.Contains(allowed, "prometheus"), "%s imports %s: only the agent records metrics", fields[0], imp)
			case strings.HasPrefix(imp, "k8s.io/kubernetes/"):
				t.Errorf("%s imports %s: the main module reaches Kubernetes through client-go only", fields[0], imp)
			}
		}
	}

	// What the agent's binary links: nothing of the tests' or of another command's.
	everyGroup := []string{"k8s.io/client-go/kubernetes", "k8s.io/client-go/discovery", "k8s.io/client-go/tools/events", "k8s.io/client-go/informers"}
	assertLinksNone(t, ".", "the agent's binary", slices.Concat(everyGroup, []string{"github.com/stretchr/testify", module + "/e2e",
		module + "/cmd", module + "/internal/kube/adapt", "k8s.io/cli-runtime", "github.com/spf13/cobra", "testing"}))
	// What the plugin's binary links: the release compiles it for five platforms, and
	// client-go's packages that register every API group, or cli-runtime's flags (which bring
	// kustomize and discovery), would nearly double each compile.
	assertLinksNone(t, "./cmd/kubectl-nodeready", "the plugin's binary", slices.Concat(everyGroup, []string{"github.com/stretchr/testify",
		module + "/agent", module + "/internal/kube/adapt", "k8s.io/cli-runtime/pkg/genericclioptions", "sigs.k8s.io/kustomize", "testing"}))
}

// assertLinksNone fails on each package of banned (or under it) that pkg's binary links.
func assertLinksNone(t *testing.T, pkg, binary string, banned []string) {
	t.Helper()
	deps, err := exec.Command("go", "list", "-deps", pkg).Output()
	require.NoError(t, err)
	for dep := range strings.Lines(string(deps)) {
		dep = strings.TrimSpace(dep)
		for _, b := range banned {
			assert.False(t, dep == b || strings.HasPrefix(dep, b+"/"), "%s links %s", binary, dep)
		}
	}
}
