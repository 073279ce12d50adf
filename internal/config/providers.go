package config

import (
	"net/url"
	"slices"
	"strings"
)

// ProviderKind is one row of the table of provider kinds: what the
// configuration knows of a kind (a vendor, or a wire protocol many servers
// speak, that an entry under providers names). Its adapter
// (internal/provider/<folder>) builds the client and reads its own errors;
// internal/daemon maps each adapter name to that constructor
// (TestNewProviderCoversEveryKind). Nothing else in the configuration names
// a vendor: Load, Validate, KeyVar, ProviderProblem and status read this
// table.
type ProviderKind struct {
	// Name is the value of providers.<name>.kind; an entry that sets no
	// kind has the kind its own name names (providers.gemini).
	Name string
	// Adapter names the adapter that speaks the kind's protocol
	// (internal/daemon's adapters); empty means Name. A vendor whose
	// server speaks a protocol nanobot has an adapter for is a row with
	// its address and key variable and that adapter: nothing else.
	Adapter string
	// Protocol says in a few words what the kind speaks, for messages
	// ("OpenAI-compatible Chat Completions: OpenAI, OpenRouter, Ollama, vLLM").
	Protocol string
	// BaseURL is the vendor's own endpoint: the default base_url of the
	// entry named Name, and of every entry of the kind when
	// BaseURLForKind. Empty: every entry must set base_url.
	BaseURL string
	// BaseURLForKind: one vendor serves the protocol, so every entry of
	// the kind has BaseURL by default (not so for a protocol many servers
	// speak: an entry of kind openai elsewhere must say where).
	BaseURLForKind bool
	// KeyVar is the environment variable that usually holds a key for
	// BaseURL's host, which always needs one: what KeyVar and
	// ProviderProblem name when the config names none.
	KeyVar string
	// Builtin entries are present without a line of configuration
	// (providers.<Name> with BaseURL), so that agents.model: <Name>/<model>
	// needs only the key.
	Builtin bool
	// Options are the keys of providers.<name> only this kind accepts.
	Options []string
}

// ProviderKinds is the table. A provider on a protocol nanobot already
// speaks is a row here; a new protocol is its adapter folder, a row here
// and its constructor in internal/daemon (docs/architecture.md, "Adding
// things").
var ProviderKinds = []ProviderKind{
	{Name: "openai", Protocol: "OpenAI-compatible Chat Completions (OpenAI, OpenRouter, Ollama, vLLM, …)",
		BaseURL: "https://api.openai.com/v1", KeyVar: "OPENAI_API_KEY", Builtin: true},
	{Name: "openai-responses", Protocol: "OpenAI's Responses API",
		BaseURL: "https://api.openai.com/v1", KeyVar: "OPENAI_API_KEY", Options: []string{"store"}},
	{Name: "anthropic", Protocol: "Anthropic's Messages API",
		BaseURL: "https://api.anthropic.com", KeyVar: "ANTHROPIC_API_KEY", Builtin: true},
	{Name: "gemini", Protocol: "Google's Gemini API",
		BaseURL: "https://generativelanguage.googleapis.com", BaseURLForKind: true, KeyVar: "GEMINI_API_KEY"},
}

// ProviderKindNames lists the kinds' names in table order.
func ProviderKindNames() []string {
	names := make([]string, len(ProviderKinds))
	for i, k := range ProviderKinds {
		names[i] = k.Name
	}
	return names
}

// LookupProviderKind returns the row of kind name.
func LookupProviderKind(name string) (ProviderKind, bool) {
	i := slices.IndexFunc(ProviderKinds, func(k ProviderKind) bool { return k.Name == name })
	if i < 0 {
		return ProviderKind{}, false
	}
	return ProviderKinds[i], true
}

// AdapterName is the adapter that serves the kind.
func (k ProviderKind) AdapterName() string {
	if k.Adapter != "" {
		return k.Adapter
	}
	return k.Name
}

// Accepts reports whether providers.<name>.<key> applies to this kind.
func (k ProviderKind) Accepts(key string) bool { return slices.Contains(k.Options, key) }

// impliedKind is the kind of a provider entry that sets none: its own name
// when that names a kind (providers.gemini needs no kind: gemini).
func impliedKind(name string) string {
	if _, ok := LookupProviderKind(name); ok {
		return name
	}
	return ""
}

// kindOf is the kind of providers.<name>: its own, else its name's.
func kindOf(name string, pc ProviderConfig) string {
	if pc.Kind != "" {
		return pc.Kind
	}
	return impliedKind(name)
}

// defaultBaseURL is where providers.<name> of kind is sent when it sets no
// base_url, "" when it must set one.
func defaultBaseURL(name, kind string) string {
	k, ok := LookupProviderKind(kind)
	if ok && (k.BaseURLForKind || name == k.Name) {
		return k.BaseURL
	}
	return ""
}

// keyVarOf is the variable that usually holds the key for base's host,
// "" for a host no kind is the vendor of (a local server, a proxy).
func keyVarOf(base string) string {
	u, err := url.Parse(base)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	for _, k := range ProviderKinds {
		if v, err := url.Parse(k.BaseURL); err == nil && v.Hostname() == u.Hostname() {
			return k.KeyVar
		}
	}
	return ""
}

// builtinProviderDefaults are the keys of the built-in entries, for the
// defaults table.
func builtinProviderDefaults() map[string]any {
	out := map[string]any{}
	for _, k := range ProviderKinds {
		if k.Builtin {
			p := "providers." + k.Name + "."
			out[p+"kind"], out[p+"api_key"], out[p+"base_url"] = k.Name, "", k.BaseURL
		}
	}
	return out
}

// builtinProviders names the built-in entries.
func builtinProviders() []string {
	var names []string
	for _, k := range ProviderKinds {
		if k.Builtin {
			names = append(names, k.Name)
		}
	}
	return names
}

// kindHelp is the hint for an entry without a kind: every kind with what
// it speaks.
func kindHelp() string {
	parts := make([]string, len(ProviderKinds))
	for i, k := range ProviderKinds {
		parts[i] = "kind: " + k.Name + " for " + k.Protocol
	}
	return strings.Join(parts, "; ")
}

// kindsAccepting lists the kinds that accept key.
func kindsAccepting(key string) []string {
	var names []string
	for _, k := range ProviderKinds {
		if k.Accepts(key) {
			names = append(names, k.Name)
		}
	}
	return names
}

// orList joins names as "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
