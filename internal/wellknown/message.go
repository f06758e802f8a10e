package wellknown

import (
	"strings"
	"unicode/utf8"
)

// Truncate returns s as valid UTF-8 of at most limit bytes: cut on a rune
// boundary and ended with "..." when it is longer. Invalid bytes become
// U+FFFD first, as the JSON encoding would make them, so the length holds
// for what the API server receives. API servers count message limits in
// bytes.
func Truncate(s string, limit int) string {
	s = strings.ToValidUTF8(s, string(utf8.RuneError))
	if len(s) <= limit {
		return s
	}
	const mark = "..."
	cut := max(limit-len(mark), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark[:min(len(mark), limit)]
}
