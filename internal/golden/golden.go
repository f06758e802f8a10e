// Package golden compares what a test prints with a file under testdata/, the
// way the kubectl plugin's unit tests and its e2e test keep their expected
// output. `go test -update` writes the files from the output instead.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the output")

// Assert compares got with testdata/name.golden, or writes it with -update.
func Assert(t testing.TB, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run the test with -update to write it")
	assert.Equal(t, string(want), got, "%s: run the test with -update after a deliberate change", path)
}
