package provider

import "strings"

// defaultContextWindow is assumed for models this table does not know; it is
// small on purpose, so an unknown model is never sent more than it can take.
// Configure routes.<name>.context_window for such models.
const defaultContextWindow = 32_000

// contextWindows maps model id prefixes to context windows in tokens, longest
// prefix first within a family.
var contextWindows = []struct {
	prefix string
	tokens int
}{
	{"gpt-4.1", 1_047_576},
	{"gpt-5", 400_000},
	{"gpt-4o", 128_000},
	{"gpt-4-turbo", 128_000},
	{"gpt-4", 8_192},
	{"gpt-3.5-turbo", 16_385},
	{"o1-mini", 128_000},
	{"o1", 200_000},
	{"o3", 200_000},
	{"o4", 200_000},
	{"claude", 200_000},
	{"deepseek", 128_000},
	{"gemini", 1_000_000},
	{"llama-3", 128_000},
	{"llama3", 128_000},
	{"qwen", 32_768},
	{"mistral", 32_000},
}

// ContextWindow returns the known context window of a model id, or a
// conservative 32k for a model the table does not know.
func ContextWindow(model string) int {
	if n, ok := KnownContextWindow(model); ok {
		return n
	}
	return defaultContextWindow
}

// KnownContextWindow returns the context window of a model id the table
// knows, ignoring an aggregator prefix such as "openai/" or "anthropic/"
// (OpenRouter).
func KnownContextWindow(model string) (int, bool) {
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	for _, w := range contextWindows {
		if strings.HasPrefix(m, w.prefix) {
			return w.tokens, true
		}
	}
	return 0, false
}
