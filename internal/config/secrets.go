package config

import (
	"cmp"
	"maps"
	"net/url"
	"slices"
	"strings"
)

// minSecretLen is the shortest value Secrets returns. Shorter values are
// placeholders (api_key: ollama, none, true) rather than credentials, and
// redacting them from every log line would blank out ordinary words.
const minSecretLen = 8

// mask is what a secret is replaced with in Redacted.
const mask = "***"

// secretWords mark a header or environment variable name as holding a
// secret (Authorization, X-Api-Key, GITHUB_TOKEN, DB_PASSWORD, ...).
var secretWords = []string{"key", "token", "secret", "passw", "auth", "credential", "cookie", "session", "private"}

// looksSecret reports whether a header or variable name suggests a secret.
func looksSecret(name string) bool {
	name = strings.ToLower(name)
	for _, w := range secretWords {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// Secrets returns every configured secret value: API keys, bot tokens, the
// webhook secret, passwords in URLs, and header and MCP environment values
// whose names look secret. Values shorter than 8 characters are left out
// (see minSecretLen). The list has no duplicates and is ordered longest
// first, so a redactor replacing them in turn never leaves the tail of a
// longer secret that contains a shorter one.
//
// It feeds log redaction and the scrubbing of the exec tool's environment.
func (c *Config) Secrets() []string {
	var s []string
	add := func(v string) {
		if len(v) >= minSecretLen && !slices.Contains(s, v) {
			s = append(s, v)
		}
	}
	addMap := func(m map[string]string) {
		for k, v := range m {
			if looksSecret(k) {
				add(v)
			}
		}
	}
	addURL := func(raw string) {
		for _, v := range urlSecrets(raw) {
			add(v)
		}
	}
	for _, p := range c.Providers {
		add(p.APIKey)
		addMap(p.ExtraHeaders)
		addURL(p.BaseURL)
	}
	t := &c.Channels.Telegram
	add(t.Token)
	if _, secret, ok := strings.Cut(t.Token, ":"); ok {
		// A bot token is "<bot id>:<secret>"; the id is public (it is the
		// bot's user id), the rest must never show, even on its own.
		add(secret)
	}
	add(t.WebhookSecret)
	addURL(t.Proxy)
	addURL(t.APIURL)
	addURL(t.WebhookURL)
	add(c.Channels.Discord.Token)
	addURL(c.Channels.Discord.APIURL)
	add(c.Channels.Web.Token)
	add(c.Channels.Transcription.APIKey)
	addURL(c.Channels.Transcription.BaseURL)
	add(c.Tools.Web.BraveAPIKey)
	for _, k := range c.API.Keys {
		add(k)
	}
	for _, m := range c.Tools.MCPServers {
		addMap(m.Headers)
		addMap(m.Env)
		addURL(m.URL)
	}
	for _, u := range natsURLs(c.Bus.NATS.URL) {
		addURL(u)
		add(natsToken(u))
	}
	slices.SortFunc(s, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b))
	})
	return s
}

// urlSecrets returns the password and the secret-looking query values of a
// URL (https://user:pass@host, ...?api_key=...).
func urlSecrets(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil || raw == "" {
		return nil
	}
	var out []string
	if pw, ok := u.User.Password(); ok {
		out = append(out, pw)
	}
	for k, vs := range u.Query() {
		if looksSecret(k) {
			out = append(out, vs...)
		}
	}
	return out
}

// Redacted returns a copy of c with every secret replaced by "***" (any
// length, unlike Secrets), for `nanobot status` and debugging output. Maps
// holding secrets are copied; c itself is not changed.
func (c Config) Redacted() Config {
	providers := make(map[string]ProviderConfig, len(c.Providers))
	for name, p := range c.Providers {
		p.APIKey = maskValue(p.APIKey)
		p.ExtraHeaders = redactMap(p.ExtraHeaders)
		p.BaseURL = redactURL(p.BaseURL)
		providers[name] = p
	}
	if c.Providers != nil {
		c.Providers = providers
	}
	t := &c.Channels.Telegram
	t.Token = maskValue(t.Token)
	t.WebhookSecret = maskValue(t.WebhookSecret)
	t.Proxy = redactURL(t.Proxy)
	t.APIURL = redactURL(t.APIURL)
	t.WebhookURL = redactURL(t.WebhookURL)
	d := &c.Channels.Discord
	d.Token = maskValue(d.Token)
	d.APIURL = redactURL(d.APIURL)
	tr := &c.Channels.Transcription
	tr.APIKey = maskValue(tr.APIKey)
	tr.BaseURL = redactURL(tr.BaseURL)
	c.Tools.Web.BraveAPIKey = maskValue(c.Tools.Web.BraveAPIKey)
	if c.API.Keys != nil {
		keys := make(map[string]string, len(c.API.Keys))
		for name, k := range c.API.Keys {
			keys[name] = maskValue(k)
		}
		c.API.Keys = keys
	}
	if c.Tools.MCPServers != nil {
		servers := make(map[string]MCPServerConfig, len(c.Tools.MCPServers))
		for name, m := range c.Tools.MCPServers {
			m.Headers = redactMap(m.Headers)
			m.Env = redactMap(m.Env)
			m.URL = redactURL(m.URL)
			servers[name] = m
		}
		c.Tools.MCPServers = servers
	}
	if urls := natsURLs(c.Bus.NATS.URL); len(urls) > 0 {
		for i, u := range urls {
			if tok := natsToken(u); tok != "" {
				u = strings.Replace(u, tok+"@", mask+"@", 1)
			}
			urls[i] = redactURL(u)
		}
		c.Bus.NATS.URL = strings.Join(urls, ",")
	}
	return c
}

func maskValue(v string) string {
	if v == "" {
		return ""
	}
	return mask
}

// redactMap copies m with the values of secret-looking names masked.
func redactMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := maps.Clone(m)
	for k, v := range out {
		if looksSecret(k) {
			out[k] = maskValue(v)
		}
	}
	return out
}

// redactURL masks the password and secret-looking query values of a URL.
// A value that does not parse but might carry credentials is masked whole.
func redactURL(raw string) string {
	if raw == "" {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		if strings.ContainsAny(raw, "@?") {
			return mask
		}
		return raw
	}
	changed := false
	// The URL encoder escapes "*"; write a plain marker and swap it after.
	const marker = "REDACTEDSECRET"
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), marker)
		changed = true
	}
	// Rewrite the query pair by pair, keeping its order and encoding.
	pairs := strings.Split(u.RawQuery, "&")
	for i, pair := range pairs {
		k, _, hasValue := strings.Cut(pair, "=")
		if name, err := url.QueryUnescape(k); err == nil && hasValue && looksSecret(name) {
			pairs[i] = k + "=" + mask
			changed = true
		}
	}
	if !changed {
		return raw
	}
	u.RawQuery = strings.Join(pairs, "&")
	return strings.Replace(u.String(), ":"+marker+"@", ":"+mask+"@", 1)
}

// natsURLs splits bus.nats.url, a comma-separated list of servers.
func natsURLs(raw string) []string {
	var out []string
	for _, u := range strings.Split(raw, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// natsToken returns the token of a NATS URL that carries one as its bare
// user (nats://TOKEN@host, NATS's token authentication), else "".
func natsToken(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return ""
	}
	if _, ok := u.User.Password(); ok {
		return ""
	}
	return u.User.Username()
}
