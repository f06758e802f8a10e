package plugin

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunbookCommands: every `kubectl nodeready` command of the alerts' runbooks
// (docs/runbooks.md) is one the plugin takes, with its flags; each runs against a fleet,
// release and reverify with --dry-run (nothing written), status --watch parsed only, as it
// never ends by itself. The critical alert's fleet-wide break-glass is among them.
func TestRunbookCommands(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "docs", "runbooks.md"))
	require.NoError(t, err)
	var commands [][]string
	inShell := false
	for line := range strings.Lines(string(doc)) {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "```"):
			inShell = line == "```sh"
		case inShell && strings.HasPrefix(line, "kubectl nodeready"):
			commands = append(commands, shellWords(t, strings.TrimPrefix(line, "kubectl nodeready")))
		}
	}
	require.GreaterOrEqual(t, len(commands), 8, "the runbooks use the plugin")
	assert.Contains(t, commands, []string{"release", "--all"}, "the fleet-wide break-glass")

	// NODE stands for a node the command is for.
	nodeFor := map[string]string{"release": "a-held", "reverify": "f-verified", "why": "a-held"}
	for _, args := range commands {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			args = slices.Clone(args)
			for i, a := range args {
				if a == "NODE" {
					args[i] = nodeFor[args[0]]
				}
			}
			if slices.Contains(args, "--watch") {
				root := (&Options{configFlags: newKubeconfigFlags()}).command("test")
				c, rest, err := root.Find(args)
				require.NoError(t, err)
				require.NoError(t, c.ParseFlags(rest))
				require.NoError(t, c.ValidateArgs(c.Flags().Args()))
				return
			}
			if len(args) > 0 && (args[0] == "release" || args[0] == "reverify") && !slices.Contains(args, "--dry-run") {
				args = append(args, "--dry-run")
			}
			client := newClient(fleet()...)
			r := run(t, client, args...)
			require.NoError(t, r.err)
			assert.NotEmpty(t, r.out)
			assert.Empty(t, patches(t, client))
		})
	}
}

// shellWords splits a command line as the shell does, for the quoting the docs use: words
// apart by spaces, '...' taken as it is.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var (
		words  []string
		word   strings.Builder
		quoted bool
		inWord bool
	)
	for _, r := range line {
		switch {
		case r == '\'':
			quoted = !quoted
			inWord = true
		case r == ' ' && !quoted:
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	require.False(t, quoted, "unbalanced quote in %q", line)
	if inWord {
		words = append(words, word.String())
	}
	return words
}
