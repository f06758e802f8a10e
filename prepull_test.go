package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCopyBinary(t *testing.T) {
	cleanEnv(t, nil)
	self, err := os.Executable()
	require.NoError(t, err)
	want, err := os.ReadFile(self)
	require.NoError(t, err)

	for _, name := range []string{"first copy", "again over the first"} {
		t.Run(name, func(t *testing.T) {
			dest := filepath.Join(t.TempDir(), "nodeready")
			if name != "first copy" {
				require.NoError(t, os.WriteFile(dest, []byte("old"), 0o755))
			}
			var stdout, stderr bytes.Buffer
			client := &countingClient{}

			code := run(t.Context(), []string{"copy-binary", dest}, &stdout, &stderr, client.new, time.Now())

			require.Equal(t, exitOK, code, "stderr: %s", stderr.String())
			assert.Empty(t, stdout.String())
			assert.Empty(t, stderr.String())
			assert.Zero(t, client.calls)
			got, err := os.ReadFile(dest)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(want, got), "the copy is the running binary")
			info, err := os.Stat(dest)
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o555), info.Mode().Perm())
			entries, err := os.ReadDir(filepath.Dir(dest))
			require.NoError(t, err)
			assert.Len(t, entries, 1, "no temporary file left behind")
		})
	}
}

func TestCopyBinaryErrors(t *testing.T) {
	cleanEnv(t, nil)
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"no path", []string{"copy-binary"}, exitConfig, "usage: nodeready copy-binary PATH"},
		{"two paths", []string{"copy-binary", "a", "b"}, exitConfig, "usage: nodeready copy-binary PATH"},
		{"missing directory", []string{"copy-binary", filepath.Join(t.TempDir(), "missing", "nodeready")}, exitFailed, "nodeready: copy-binary: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			client := &countingClient{}

			code := run(t.Context(), tt.args, &stdout, &stderr, client.new, time.Now())

			assert.Equal(t, tt.code, code)
			assert.Contains(t, stderr.String(), tt.stderr)
			assert.Zero(t, client.calls)
		})
	}
}
