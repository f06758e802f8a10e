package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestShowStatus: an act of the demo ends with what the plugin prints for `kubectl nodeready
// status`, run with the act's kubeconfig, under the command a user would type.
func TestShowStatus(t *testing.T) {
	dir := t.TempDir()
	plugin := filepath.Join(dir, "kubectl-nodeready")
	require.NoError(t, os.WriteFile(plugin, []byte("#!/bin/sh\necho \"args: $*\"\n"), 0o755))
	var out bytes.Buffer
	require.NoError(t, showStatus(t.Context(), &out, plugin, "/tmp/admin.kubeconfig"))
	assert.Equal(t, "\nThe fleet as nodeready sees it:\n\n$ kubectl nodeready status\nargs: --kubeconfig /tmp/admin.kubeconfig status\n", out.String())

	require.NoError(t, os.WriteFile(plugin, []byte("#!/bin/sh\nexit 1\n"), 0o755))
	assert.ErrorContains(t, showStatus(t.Context(), &out, plugin, "x"), "kubectl nodeready status: exit status 1")
}
