package config

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
)

// UsedProviders lists the providers the model settings use (agents.model,
// agents.fallbacks and the routes' fallbacks), each with the first key
// that uses it, in name order. A name that does not resolve is left out
// (Validate reports it).
func (c *Config) UsedProviders() []string {
	var used []string
	add := func(s string) {
		if r, err := c.ResolveRoute(s); err == nil && !slices.Contains(used, r.Provider) {
			used = append(used, r.Provider)
		}
	}
	if c.Agents.Model != "" {
		add(c.Agents.Model)
	}
	for _, f := range c.Agents.Fallbacks {
		add(f)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Routes)) {
		add(c.Routes[name].Model)
		for _, f := range c.Routes[name].Fallbacks {
			add(f)
		}
	}
	slices.Sort(used)
	return used
}

// KeyVar is the environment variable providers.<name>.api_key is read from:
// the one its ${NAME} reference names, else the vendor's usual one for an
// official endpoint (OPENAI_API_KEY for api.openai.com), else "".
func (c *Config) KeyVar(name string) string {
	if v, ok := c.SecretVars["providers."+name+".api_key"]; ok {
		return v.Name
	}
	pc := c.Providers[name]
	base := pc.BaseURL
	if base == "" && (pc.Kind == "gemini" || impliedKind(name) == "gemini") {
		base = GeminiBaseURL
	}
	if u, err := url.Parse(base); err == nil {
		return officialHosts[u.Hostname()]
	}
	return ""
}

// ProviderProblem says why providers.<name> cannot serve a call before one
// is made — its key is missing — with the fix, or "" when nothing is
// known to be wrong. A provider at an official endpoint needs a key; one
// at a local server (Ollama, vLLM) may need none.
func (c *Config) ProviderProblem(name string) string {
	pc, ok := c.Providers[name]
	if !ok || pc.APIKey != "" {
		return ""
	}
	key := "providers." + name + ".api_key"
	if v, ok := c.SecretVars[key]; ok {
		how := "is not set"
		if v.Set {
			how = "is empty"
		}
		return fmt.Sprintf("no API key: %s %s (%s: ${%s}); export it and restart, or paste a key on the web page", v.Name, how, key, v.Name)
	}
	if env := c.KeyVar(name); env != "" {
		return fmt.Sprintf("no API key: %s is empty (write api_key: ${%s} and export %s, or paste a key on the web page)", key, env, env)
	}
	return ""
}

// ChannelProblem says why an enabled channel cannot start before it
// tries — the variable of its credential (ChannelSection.TokenKey) is unset
// — with the fix, or "" when nothing is known to be wrong.
func (c *Config) ChannelProblem(channel string) string {
	s, v, ok := c.Channels.section(channel)
	if !ok || s.TokenKey == "" {
		return ""
	}
	key := "channels." + channel + "." + s.TokenKey
	if sv, ok := c.SecretVars[key]; ok && (!sv.Set || sectionField(v, s.TokenKey) == "") {
		how := "is not set"
		if sv.Set {
			how = "is empty"
		}
		return fmt.Sprintf("no bot token: %s %s (%s: ${%s}); export it and restart, or paste a token on the web page", sv.Name, how, key, sv.Name)
	}
	return ""
}

// ChannelToken is the credential of channel (its section's TokenKey), ""
// when it has none.
func (c *Config) ChannelToken(channel string) string {
	s, v, ok := c.Channels.section(channel)
	if !ok || s.TokenKey == "" {
		return ""
	}
	return sectionField(v, s.TokenKey)
}

// ChannelTokenVar is the variable channels.<channel>'s credential is read
// from, or "".
func (c *Config) ChannelTokenVar(channel string) string {
	s, _, ok := c.Channels.section(channel)
	if !ok || s.TokenKey == "" {
		return ""
	}
	return c.SecretVars["channels."+channel+"."+s.TokenKey].Name
}
