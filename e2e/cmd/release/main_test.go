package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/nodeready/nodeready/e2e/framework"
)

const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func runOK(t *testing.T, args ...string) {
	t.Helper()
	var stderr bytes.Buffer
	require.Equal(t, 0, run(args, &stderr), stderr.String())
}

// TestManifests: install.yaml holds every object of `kubectl apply -f manifests/`, in its
// order, the agent image by digest and no other image of it.
func TestManifests(t *testing.T) {
	root := framework.RepoRoot(t)
	out := filepath.Join(t.TempDir(), "install.yaml")
	image := "registry.example.com/fork/nodeready@" + digest
	runOK(t, "manifests", "-image", image, "-out", out, filepath.Join(root, "manifests"))

	b, err := os.ReadFile(out)
	require.NoError(t, err)
	var got []string
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var o map[string]any
		if dec.Decode(&o) != nil {
			break
		}
		if o != nil {
			got = append(got, objectName(o))
		}
	}
	files, err := filepath.Glob(filepath.Join(root, "manifests", "*.yaml"))
	require.NoError(t, err)
	var want []string
	for _, f := range files { // Glob sorts, as kubectl does
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var o map[string]any
			if dec.Decode(&o) != nil {
				break
			}
			if o != nil {
				want = append(want, objectName(o))
			}
		}
	}
	assert.Equal(t, want, got)
	assert.Contains(t, string(b), "image: "+image)
	assert.NotContains(t, string(b), Repo, "the agent image by tag")
}

func objectName(o map[string]any) string {
	meta, _ := o["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	kind, _ := o["kind"].(string)
	return kind + "/" + name
}

// TestChart: the chart's copy renders the pods with the image by digest, every file carries
// the given time, and packing the copies of two checkouts gives the same archive.
func TestChart(t *testing.T) {
	root := framework.RepoRoot(t)
	created := time.Unix(1764806400, 0)
	image := "registry.example.com/fork/nodeready@" + digest
	a, b := t.TempDir(), t.TempDir()
	runOK(t, "chart", "-image", image, "-created", "1764806400", "-out", a, filepath.Join(root, "charts", "nodeready"))
	runOK(t, "chart", "-image", image, "-created", "1764806400", "-out", b, filepath.Join(root, "charts", "nodeready"))

	var values struct {
		Image struct{ Repository, Tag, Digest string } `yaml:"image"`
	}
	v, err := os.ReadFile(filepath.Join(a, "nodeready", "values.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(v, &values))
	assert.Equal(t, "registry.example.com/fork/nodeready", values.Image.Repository)
	assert.Equal(t, digest, values.Image.Digest)
	orig, err := os.ReadFile(filepath.Join(root, "charts", "nodeready", "values.yaml"))
	require.NoError(t, err)
	assert.Equal(t, strings.Count(string(orig), "\n"), strings.Count(string(v), "\n"), "only the image's lines change")
	chartYAML, err := os.ReadFile(filepath.Join(a, "nodeready", "Chart.yaml"))
	require.NoError(t, err)
	assert.NotContains(t, string(chartYAML), Repo+":", "Artifact Hub's image is the release's")

	require.NoError(t, filepath.Walk(filepath.Join(a, "nodeready"), func(path string, info os.FileInfo, err error) error {
		if err == nil {
			assert.True(t, info.ModTime().Equal(created), "%s: %s", path, info.ModTime())
		}
		return err
	}))

	helm := filepath.Join(root, ".cache", "tools", "helm", "bin", "helm")
	if _, err := os.Stat(helm); err != nil {
		t.Skipf("no helm (make tools): %v", err)
	}
	var sums []string
	for _, dir := range []string{a, b} {
		out, err := exec.CommandContext(t.Context(), helm, "package", filepath.Join(dir, "nodeready"), "--destination", dir).CombinedOutput()
		require.NoError(t, err, "%s", out)
		tgz, err := filepath.Glob(filepath.Join(dir, "nodeready-*.tgz"))
		require.NoError(t, err)
		require.Len(t, tgz, 1)
		data, err := os.ReadFile(tgz[0])
		require.NoError(t, err)
		sums = append(sums, string(data))
		out, err = exec.CommandContext(t.Context(), helm, "template", "nodeready", tgz[0]).CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.True(t, strings.Contains(string(out), `image: "`+image+`"`), "the chart's pods run the image by digest")
	}
	assert.True(t, sums[0] == sums[1], "two copies pack to the same archive")
}

// TestSums: SHA256SUMS lists each file of the directory, not itself or a subdirectory, as
// sha256sum --check reads it.
func TestSums(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b.txt"), []byte("b\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "image-oci"), 0o755))
	runOK(t, "sums", dir)
	runOK(t, "sums", dir) // again: SHA256SUMS does not list itself
	b, err := os.ReadFile(filepath.Join(dir, SumsFile))
	require.NoError(t, err)
	assert.Equal(t, "87428fc522803d31065e7bce3cf03fe475096631e5e07bbd7a0fde60c4cf25c7  a.txt\n"+
		"0263829989b6fd954f72baaf2fc64bc2e2f01d692d4de72986ea808f6e99813f  b.txt\n", string(b))
	if _, err := exec.LookPath("sha256sum"); err == nil {
		cmd := exec.CommandContext(t.Context(), "sha256sum", "--check", "--strict", SumsFile)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		assert.NoError(t, err, "%s", out)
	}
}

// TestRefused: each mistake is refused, naming what to write.
func TestRefused(t *testing.T) {
	root := framework.RepoRoot(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "manifests, chart or sums"},
		{[]string{"publish", "x"}, "unknown command"},
		{[]string{"manifests", "-image", "ghcr.io/x/nodeready:v1", "-out", "x", "dir"}, "REPOSITORY@sha256"},
		{[]string{"manifests", "-image", "ghcr.io/x/nodeready@" + digest, "dir"}, "-out"},
		{[]string{"chart", "-image", "ghcr.io/x/nodeready@" + digest, "-out", "x", "dir"}, "-created"},
		{[]string{"manifests", "-image", "ghcr.io/x/nodeready@" + digest, "-out", filepath.Join(t.TempDir(), "x"), filepath.Join(root, "docs")}, "no .yaml file"},
	} {
		var stderr bytes.Buffer
		assert.NotEqual(t, 0, run(tc.args, &stderr), "%v", tc.args)
		assert.Contains(t, stderr.String(), tc.want, "%v", tc.args)
	}
}
