package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMultiArchIndex writes an index of two platforms and reads it back.
func TestMultiArchIndex(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"amd64", "arm64", "certs"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte(f), 0o644))
	}
	out := filepath.Join(dir, "oci")
	code := run([]string{"-binary", "linux/amd64=" + filepath.Join(dir, "amd64") + ",linux/arm64=" + filepath.Join(dir, "arm64"),
		"-ca-certs", filepath.Join(dir, "certs"), "-oci", out}, io.Discard)
	require.Equal(t, 0, code)

	p, err := layout.FromPath(out)
	require.NoError(t, err)
	idx, err := p.ImageIndex()
	require.NoError(t, err)
	m, err := idx.IndexManifest()
	require.NoError(t, err)
	assert.Equal(t, types.OCIImageIndex, m.MediaType)
	var archs []string
	for _, d := range m.Manifests {
		archs = append(archs, d.Platform.Architecture)
		img, err := idx.Image(d.Digest)
		require.NoError(t, err)
		cf, err := img.ConfigFile()
		require.NoError(t, err)
		assert.Equal(t, d.Platform.Architecture, cf.Architecture)
		assert.Equal(t, "65532:65532", cf.Config.User)
	}
	assert.Equal(t, []string{"amd64", "arm64"}, archs)
	assert.Equal(t, 1, run([]string{"-binary", "windows/amd64=x", "-oci", out}, io.Discard), "Linux images only")
}
