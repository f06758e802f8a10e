package wellknown

import (
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestTruncate(t *testing.T) {
	tests := []struct {
		name, in string
		limit    int
		want     string
	}{
		{"short stays", "dns x: no such host", 1024, "dns x: no such host"},
		{"exactly the limit stays", "abcdef", 6, "abcdef"},
		{"cut and marked", "abcdefgh", 6, "abc..."},
		{"cut before a rune, not inside it", "ab€cdefgh", 7, "ab..."}, // € is 3 bytes at 2..4
		{"invalid bytes become U+FFFD", "a\xffb", 10, "a\uFFFDb"},
		{"tiny limit", "abcdef", 2, ".."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Truncate(tt.in, tt.limit)
			assert.Equal(t, tt.want, got)
			assert.LessOrEqual(t, len(got), tt.limit)
			assert.True(t, utf8.ValidString(got))
		})
	}
}
