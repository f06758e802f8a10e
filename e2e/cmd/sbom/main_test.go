package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/mod/modfile"

	"github.com/nodeready/nodeready/e2e/framework"
)

// TestSBOM builds the agent as the release does and reads its SBOM: it describes the binary by
// its SHA-256, names the Go release and every module of the agent's go.mod that the binary
// links at the version go.mod requires, each with its purl, and every relationship joins two
// of its packages. The same binary gives the same document.
func TestSBOM(t *testing.T) {
	root := framework.RepoRoot(t)
	bin := filepath.Join(t.TempDir(), "nodeready")
	build := exec.CommandContext(t.Context(), "go", "build", "-trimpath", "-o", bin, ".")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	platform := "linux/" + runtime.GOARCH

	sbom := func() []byte {
		var stdout, stderr bytes.Buffer
		require.Equal(t, 0, run([]string{"-version", "v9.8.7", "-created", "1764806400", platform + "=" + bin}, &stdout, &stderr), stderr.String())
		return stdout.Bytes()
	}
	text := sbom()
	assert.Equal(t, string(text), string(sbom()), "the same binary, the same document")

	var doc spdxDocument
	require.NoError(t, json.Unmarshal(text, &doc))
	assert.Equal(t, "SPDX-2.3", doc.SPDXVersion)
	assert.Equal(t, "2025-12-04T00:00:00Z", doc.CreationInfo.Created)
	ids := map[string]spdxPackage{}
	purls := map[string]string{}
	for _, p := range doc.Packages {
		ids[p.SPDXID] = p
		require.Len(t, p.ExternalRefs, 1, p.Name)
		purls[p.Name] = p.ExternalRefs[0].Locator
	}
	require.Len(t, doc.DocumentDescribes, 1)
	described := ids[doc.DocumentDescribes[0]]
	assert.Equal(t, "v9.8.7", described.VersionInfo)
	data, err := os.ReadFile(bin)
	require.NoError(t, err)
	require.Len(t, described.Checksums, 1)
	assert.Equal(t, "SHA256", described.Checksums[0].Algorithm)
	assert.Equal(t, sha256hex(data), described.Checksums[0].Value)
	for _, r := range doc.Relationships {
		assert.Contains(t, append([]string{doc.SPDXID}, keys(ids)...), r.Element, "relationship %+v", r)
		assert.Contains(t, ids, r.Related, "relationship %+v", r)
	}

	assert.Equal(t, "pkg:golang/stdlib@"+runtime.Version(), purls["stdlib"])
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	mf, err := modfile.Parse("go.mod", gomod, nil)
	require.NoError(t, err)
	// Modules the agent links for sure: client-go, zerolog, the Prometheus client.
	for _, r := range mf.Require {
		switch r.Mod.Path {
		case "k8s.io/client-go", "github.com/rs/zerolog", "github.com/prometheus/client_golang":
			assert.Equal(t, "pkg:golang/"+r.Mod.Path+"@"+r.Mod.Version, purls[r.Mod.Path], r.Mod.Path)
		}
	}
	assert.NotContains(t, purls, "github.com/stretchr/testify", "a module only the tests use is not in the binary")
}

// TestRefused: what is not a Go binary, or not of the platform given, is refused by name.
func TestRefused(t *testing.T) {
	text := filepath.Join(t.TempDir(), "text")
	require.NoError(t, os.WriteFile(text, []byte("not a binary"), 0o644))
	self, err := os.Executable()
	require.NoError(t, err)
	other := "linux/amd64"
	if runtime.GOARCH == "amd64" {
		other = "linux/arm64"
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-version", "v1.0.0", "-created", "0", "linux/amd64=" + text}, 1, "no Go build information"},
		{[]string{"-version", "v1.0.0", "-created", "0", other + "=" + self}, 1, "not " + other},
		{[]string{"-version", "v1.0.0", "-created", "0", self}, 2, "OS/ARCH=BINARY"},
		{[]string{"-created", "0", "linux/amd64=" + self}, 2, "-version"},
		{[]string{"-version", "v1.0.0", "linux/amd64=" + self}, 2, "-created"},
	} {
		var stderr bytes.Buffer
		assert.Equal(t, tc.code, run(tc.args, &bytes.Buffer{}, &stderr), "%v", tc.args)
		assert.Contains(t, stderr.String(), tc.want, "%v", tc.args)
	}
}

func keys(m map[string]spdxPackage) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func sha256hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
