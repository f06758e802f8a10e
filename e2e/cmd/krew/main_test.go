package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/nodeready/nodeready/e2e/framework"
)

// manifest is what krew reads of a plugin manifest.
type manifest struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		Version          string `yaml:"version"`
		ShortDescription string `yaml:"shortDescription"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
			URI    string `yaml:"uri"`
			SHA256 string `yaml:"sha256"`
			Bin    string `yaml:"bin"`
		} `yaml:"platforms"`
	} `yaml:"spec"`
}

// TestKrewManifest: the manifest names exactly the platforms the release builds
// (PLUGIN_PLATFORMS in the Makefile); packed, each platform's entry points at the archive the
// release publishes, with that archive's SHA-256, and the archive holds the binary the entry
// names and the license; packing twice gives the same archives.
func TestKrewManifest(t *testing.T) {
	root := framework.RepoRoot(t)
	tmplPath := filepath.Join(root, "plugins", "krew", "nodeready.yaml")
	tmpl, err := os.ReadFile(tmplPath)
	require.NoError(t, err)

	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^PLUGIN_PLATFORMS \?= (\S+)$`).FindSubmatch(makefile)
	require.NotNil(t, m, "the Makefile sets PLUGIN_PLATFORMS")
	release := strings.Split(string(m[1]), ",")
	platforms := Platforms(string(tmpl))
	assert.ElementsMatch(t, release, platforms, "the manifest's platforms are the ones make plugin-release builds")

	// Fake binaries: what is packed is tested, not the compiler.
	dir := t.TempDir()
	bins := map[string]string{}
	for _, p := range platforms {
		bins[p] = filepath.Join(dir, strings.ReplaceAll(p, "/", "_"))
		require.NoError(t, os.WriteFile(bins[p], []byte("binary for "+p), 0o755))
	}
	license := filepath.Join(root, "LICENSE")
	out := filepath.Join(dir, "out")
	require.NoError(t, runRelease(t, "v9.8.7", bins, tmplPath, license, out))

	b, err := os.ReadFile(filepath.Join(out, "nodeready.yaml"))
	require.NoError(t, err)
	assert.NotContains(t, string(b), "{{", "every placeholder filled")
	var mf manifest
	require.NoError(t, yaml.Unmarshal(b, &mf))
	assert.Equal(t, "krew.googlecontainertools.github.com/v1alpha2", mf.APIVersion)
	assert.Equal(t, "Plugin", mf.Kind)
	assert.Equal(t, "nodeready", mf.Metadata.Name, "kubectl krew install nodeready installs kubectl-nodeready")
	assert.Equal(t, "v9.8.7", mf.Spec.Version)
	require.Len(t, mf.Spec.Platforms, len(platforms))
	for _, p := range mf.Spec.Platforms {
		platform := p.Selector.MatchLabels["os"] + "/" + p.Selector.MatchLabels["arch"]
		require.Contains(t, platforms, platform)
		name := Archive("v9.8.7", platform)
		assert.Equal(t, "https://github.com/nodeready/nodeready/releases/download/v9.8.7/"+name, p.URI)
		archive, err := os.ReadFile(filepath.Join(out, name))
		require.NoError(t, err)
		sum := sha256.Sum256(archive)
		assert.Equal(t, hex.EncodeToString(sum[:]), p.SHA256, platform)
		sumFile, err := os.ReadFile(filepath.Join(out, name+".sha256"))
		require.NoError(t, err)
		assert.Equal(t, p.SHA256+"  "+name+"\n", string(sumFile))

		files := unpack(t, archive)
		assert.Equal(t, "binary for "+platform, string(files[p.Bin]), "the binary the entry names is in the archive")
		assert.Equal(t, strings.HasPrefix(platform, "windows/"), strings.HasSuffix(p.Bin, ".exe"))
		assert.Contains(t, files, "LICENSE")
		assert.Len(t, files, 2)
	}

	again := filepath.Join(dir, "again")
	require.NoError(t, runRelease(t, "v9.8.7", bins, tmplPath, license, again))
	b2, err := os.ReadFile(filepath.Join(again, "nodeready.yaml"))
	require.NoError(t, err)
	assert.Equal(t, string(b), string(b2), "reproducible archives")

	// A platform missing, or one the manifest does not name, is refused.
	delete(bins, platforms[0])
	assert.ErrorContains(t, runRelease(t, "v9.8.7", bins, tmplPath, license, filepath.Join(dir, "x")), "build every platform it names")
	bins[platforms[0]] = bins[platforms[1]]
	bins["plan9/386"] = bins[platforms[1]]
	assert.ErrorContains(t, runRelease(t, "v9.8.7", bins, tmplPath, license, filepath.Join(dir, "y")), "build every platform it names")
}

// runRelease runs the command as make plugin-release does.
func runRelease(t *testing.T, version string, bins map[string]string, tmpl, license, out string) error {
	t.Helper()
	var list []string
	for p, path := range bins {
		list = append(list, p+"="+path)
	}
	slices.Sort(list)
	var stderr bytes.Buffer
	if code := run([]string{"-version", version, "-binary", strings.Join(list, ","), "-template", tmpl, "-license", license, "-out", out}, &stderr); code != 0 {
		return &exitError{stderr.String()}
	}
	return nil
}

type exitError struct{ msg string }

func (e *exitError) Error() string { return e.msg }

// unpack returns the files of a tar.gz.
func unpack(t *testing.T, archive []byte) map[string][]byte {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		require.NoError(t, err)
		b, err := io.ReadAll(tr)
		require.NoError(t, err)
		files[h.Name] = b
	}
}
