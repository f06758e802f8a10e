// Command sbom writes the SPDX 2.3 JSON software bill of materials of the agent image's
// binaries, offline, from what the Go toolchain recorded in them (debug/buildinfo, what
// `go version -m` prints): the Go release that built them and every module they link, with its
// version, as a package each with its purl. One document covers every platform's binary: each
// binary is a package of its own, with its SHA-256, that depends on the modules it links.
//
//	go run ./cmd/sbom -version v0.1.0 -created 1764806400 -out ../dist/nodeready.spdx.json \
//	    linux/amd64=../bin/linux_amd64/nodeready linux/arm64=../bin/linux_arm64/nodeready
//
// The document is the same for the same binaries: packages and relationships are sorted, and
// its time is -created (the release's commit time, SOURCE_DATE_EPOCH in the Makefile), not the
// clock's. A scanner that reads SPDX (grype sbom:FILE, trivy sbom FILE) matches the modules
// against vulnerability databases by their purls.
package main

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sbom", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "nodeready", "the document's and the binaries' name")
	version := fs.String("version", "", "the release's version, such as v0.1.0 (required): -trimpath builds record (devel)")
	created := fs.String("created", "", "the document's creation time, in Unix seconds (required: the release's commit time keeps the document reproducible)")
	namespace := fs.String("namespace", "https://github.com/nodeready/nodeready/releases/download", "the URI under which the document's namespace is made unique")
	out := fs.String("out", "", "write the document here instead of stdout")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	secs, err := strconv.ParseInt(*created, 10, 64)
	if *version == "" || err != nil || fs.NArg() == 0 {
		fmt.Fprintln(stderr, "sbom: -version, -created (Unix seconds) and at least one OS/ARCH=BINARY are required")
		return 2
	}
	var bins []binary
	for _, arg := range fs.Args() {
		platform, path, ok := strings.Cut(arg, "=")
		if !ok || !strings.Contains(platform, "/") || path == "" {
			fmt.Fprintf(stderr, "sbom: %q: write OS/ARCH=BINARY\n", arg)
			return 2
		}
		b, err := readBinary(platform, path)
		if err != nil {
			fmt.Fprintf(stderr, "sbom: %v\n", err)
			return 1
		}
		bins = append(bins, b)
	}
	doc := document(*name, *version, *namespace, time.Unix(secs, 0).UTC(), bins)
	var text bytes.Buffer
	enc := json.NewEncoder(&text)
	enc.SetEscapeHTML(false) // a purl's qualifiers are joined by &
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		fmt.Fprintf(stderr, "sbom: %v\n", err)
		return 1
	}
	if *out == "" {
		_, err = stdout.Write(text.Bytes())
	} else {
		err = os.WriteFile(*out, text.Bytes(), 0o644)
	}
	if err != nil {
		fmt.Fprintf(stderr, "sbom: %v\n", err)
		return 1
	}
	return 0
}

// binary is what one platform's binary says of itself.
type binary struct {
	platform string // linux/amd64
	sha256   string
	goVer    string   // go1.26.8
	main     string   // the main module's path
	modules  []module // the modules it links, not the main one
}

type module struct{ path, version string }

// readBinary reads the build information the Go toolchain put into the binary at path.
func readBinary(platform, path string) (binary, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return binary{}, err
	}
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return binary{}, fmt.Errorf("%s: no Go build information (not a Go binary?): %w", path, err)
	}
	sum := sha256.Sum256(data)
	b := binary{platform: platform, sha256: hex.EncodeToString(sum[:]), goVer: info.GoVersion, main: info.Main.Path}
	for _, d := range info.Deps {
		if d.Replace != nil { // what is linked is the replacement
			d = d.Replace
		}
		b.modules = append(b.modules, module{path: d.Path, version: d.Version})
	}
	for _, s := range info.Settings {
		if (s.Key == "GOOS" || s.Key == "GOARCH") && !strings.Contains(platform, s.Value) {
			return binary{}, fmt.Errorf("%s: built for %s=%s, not %s", path, s.Key, s.Value, platform)
		}
	}
	return b, nil
}

// The SPDX 2.3 JSON fields the document uses.
type (
	spdxDocument struct {
		SPDXVersion       string             `json:"spdxVersion"`
		DataLicense       string             `json:"dataLicense"`
		SPDXID            string             `json:"SPDXID"`
		Name              string             `json:"name"`
		DocumentNamespace string             `json:"documentNamespace"`
		CreationInfo      spdxCreationInfo   `json:"creationInfo"`
		DocumentDescribes []string           `json:"documentDescribes"`
		Packages          []spdxPackage      `json:"packages"`
		Relationships     []spdxRelationship `json:"relationships"`
	}
	spdxCreationInfo struct {
		Created  string   `json:"created"`
		Creators []string `json:"creators"`
	}
	spdxPackage struct {
		Name             string            `json:"name"`
		SPDXID           string            `json:"SPDXID"`
		VersionInfo      string            `json:"versionInfo"`
		Supplier         string            `json:"supplier"`
		DownloadLocation string            `json:"downloadLocation"`
		FilesAnalyzed    bool              `json:"filesAnalyzed"`
		Checksums        []spdxChecksum    `json:"checksums,omitempty"`
		LicenseConcluded string            `json:"licenseConcluded"`
		LicenseDeclared  string            `json:"licenseDeclared"`
		CopyrightText    string            `json:"copyrightText"`
		PrimaryPurpose   string            `json:"primaryPackagePurpose"`
		ExternalRefs     []spdxExternalRef `json:"externalRefs,omitempty"`
	}
	spdxChecksum struct {
		Algorithm string `json:"algorithm"`
		Value     string `json:"checksumValue"`
	}
	spdxExternalRef struct {
		Category string `json:"referenceCategory"`
		Type     string `json:"referenceType"`
		Locator  string `json:"referenceLocator"`
	}
	spdxRelationship struct {
		Element string `json:"spdxElementId"`
		Type    string `json:"relationshipType"`
		Related string `json:"relatedSpdxElement"`
	}
)

// notID is what SPDX identifiers may not hold: letters, digits, '.' and '-' only.
var notID = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

func spdxID(kind, s string) string { return "SPDXRef-" + kind + "-" + notID.ReplaceAllString(s, "-") }

func purl(path, version string) string { return "pkg:golang/" + path + "@" + version }

// document makes the SPDX document of bins.
func document(name, version, namespace string, created time.Time, bins []binary) spdxDocument {
	slices.SortFunc(bins, func(a, b binary) int { return strings.Compare(a.platform, b.platform) })
	pkg := func(id, name, version, purlText, purpose string) spdxPackage {
		p := spdxPackage{Name: name, SPDXID: id, VersionInfo: version, Supplier: "NOASSERTION", DownloadLocation: "NOASSERTION",
			LicenseConcluded: "NOASSERTION", LicenseDeclared: "NOASSERTION", CopyrightText: "NOASSERTION", PrimaryPurpose: purpose}
		if purlText != "" {
			p.ExternalRefs = []spdxExternalRef{{Category: "PACKAGE-MANAGER", Type: "purl", Locator: purlText}}
		}
		return p
	}
	doc := spdxDocument{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT", Name: name + "-" + version,
		CreationInfo: spdxCreationInfo{Created: created.Format(time.RFC3339), Creators: []string{"Organization: nodeready", "Tool: nodeready-e2e-sbom"}},
	}
	deps := map[string]spdxPackage{}
	var rels []spdxRelationship
	content := sha256.New() // the namespace is unique to these binaries
	for _, b := range bins {
		id := spdxID("Binary", name+"-"+b.platform)
		p := pkg(id, name+" ("+b.platform+")", version, purl(b.main, version)+"?os="+strings.ReplaceAll(b.platform, "/", "&arch="), "APPLICATION")
		p.Checksums = []spdxChecksum{{Algorithm: "SHA256", Value: b.sha256}}
		doc.Packages = append(doc.Packages, p)
		doc.DocumentDescribes = append(doc.DocumentDescribes, id)
		rels = append(rels, spdxRelationship{Element: doc.SPDXID, Type: "DESCRIBES", Related: id})
		content.Write([]byte(b.sha256))
		mods := append([]module{{path: "stdlib", version: b.goVer}}, b.modules...)
		for _, m := range mods {
			depID := spdxID("Module", m.path+"-"+m.version)
			if _, ok := deps[depID]; !ok {
				// The Go release is stdlib@go1.26.8 in purl's form, as scanners of Go binaries name it.
				deps[depID] = pkg(depID, m.path, m.version, purl(m.path, m.version), "LIBRARY")
			}
			rels = append(rels, spdxRelationship{Element: id, Type: "DEPENDS_ON", Related: depID})
		}
	}
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for id := range deps {
			if !yield(id) {
				return
			}
		}
	}) {
		doc.Packages = append(doc.Packages, deps[id])
	}
	doc.Relationships = rels
	doc.DocumentNamespace = fmt.Sprintf("%s/%s/%s.spdx.json#%s", strings.TrimSuffix(namespace, "/"), version, name, hex.EncodeToString(content.Sum(nil))[:16])
	return doc
}
