package tools

import (
	"fmt"
	"unicode/utf8"
)

// capMiddle shortens s to max characters (runes) by cutting its middle,
// keeping the first two thirds and the last third: the start says what the
// output is, the end usually holds the outcome. A marker in the gap says how
// much was cut. cut is the number of characters removed (0: unchanged).
func capMiddle(s string, max int) (out string, cut int) {
	n := utf8.RuneCountInString(s)
	if max <= 0 || n <= max {
		return s, 0
	}
	head := max * 2 / 3
	tail := max - head
	cut = n - head - tail
	headEnd := runeOffset(s, head)
	tailStart := runeOffset(s, n-tail)
	marker := fmt.Sprintf("\n\n[... %d characters cut: output exceeded the %d-character limit ...]\n\n", cut, max)
	return s[:headEnd] + marker + s[tailStart:], cut
}

// runeOffset returns the byte offset of the i-th rune of s.
func runeOffset(s string, i int) int {
	for off := range s {
		if i == 0 {
			return off
		}
		i--
	}
	return len(s)
}
