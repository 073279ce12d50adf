package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Validate checks that the values make sense, alone and together, and
// reports every problem at once (errors.Join), one per line in the form
// "key.path: what is wrong (how to fix it)".
func (c *Config) Validate() error {
	var p Problems
	c.validateAgents(&p)
	validateHistory(&p, &c.History)
	c.validateProviders(&p)
	c.validateRoutes(&p)
	c.validateSections(&p)
	validateTranscription(&p, &c.Channels.Transcription)
	c.validateTools(&p)
	validateGateway(&p, &c.Gateway)
	validateAPI(&p, &c.API)
	validateWeb(&p, &c.Channels.Web)
	validateBus(&p, &c.Bus)
	validateLog(&p, &c.Log)
	c.validateUsage(&p)
	return errors.Join(p...)
}

// Problems collects what Validate finds; each method adds one when its
// check fails. A channel's section is checked with it too
// (ChannelSection.Validate), so that its messages read like the rest.
type Problems []error

// Add reports a problem of key.
func (p *Problems) Add(key, format string, args ...any) {
	*p = append(*p, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
}

// AtLeast reports v below lo.
func (p *Problems) AtLeast(key string, v, lo int64) {
	if v < lo {
		p.Add(key, "must be at least %d, got %d", lo, v)
	}
}

// Positive reports a duration that is not positive.
func (p *Problems) Positive(key string, d time.Duration) {
	if d <= 0 {
		p.Add(key, "must be a positive duration, got %s (write e.g. 30s or 5m)", d)
	}
}

// OneOf reports v not among allowed.
func (p *Problems) OneOf(key, v string, allowed ...string) {
	if !slices.Contains(allowed, v) {
		p.Add(key, "must be one of %s, got %q", strings.Join(allowed, ", "), v)
	}
}

// HTTPURL checks an http(s) URL with a host; empty is allowed only when
// optional.
func (p *Problems) HTTPURL(key, v string, optional bool) {
	if v == "" {
		if !optional {
			p.Add(key, "must not be empty (write an http:// or https:// URL)")
		}
		return
	}
	if err := CheckURL(v, "http", "https"); err != nil {
		p.Add(key, "%v", err)
	}
}

// CheckURL checks that v is a URL of one of schemes with a host; the error
// shows v with its secrets masked.
func CheckURL(v string, schemes ...string) error {
	u, err := url.Parse(v)
	if err != nil {
		return fmt.Errorf("not a valid URL: %v", unwrapURLError(err))
	}
	if !slices.Contains(schemes, u.Scheme) || u.Host == "" {
		return fmt.Errorf("must be a %s URL with a host, got %q", strings.Join(schemes, " or "), redactURL(v))
	}
	return nil
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func (p *Problems) model(key, s string, c *Config, used map[string][]string) {
	r, err := c.ResolveRoute(s)
	if err != nil {
		p.Add(key, "%v", err)
		return
	}
	used[r.Provider] = append(used[r.Provider], key)
}

func (c *Config) validateAgents(p *Problems) {
	a := &c.Agents
	if a.Workspace == "" {
		p.Add("agents.workspace", "must not be empty (write e.g. ~/.nanobot/workspace)")
	}
	switch {
	case a.SessionsDir == "":
		p.Add("agents.sessions_dir", "must not be empty (the default is sessions, next to the config file)")
	case a.Workspace != "" && within(a.SessionsDir, a.Workspace):
		p.Add("agents.sessions_dir", "must be outside agents.workspace (%s), where the tools cannot reach it; got %s", a.Workspace, a.SessionsDir)
	case a.Workspace != "" && within(a.Workspace, a.SessionsDir):
		// The tools refuse everything under the sessions dir: the whole
		// workspace would be off limits.
		p.Add("agents.sessions_dir", "must not contain agents.workspace (%s); got %s", a.Workspace, a.SessionsDir)
	}
	if a.Model == "" {
		p.Add("agents.model", "must not be empty (write provider/model, e.g. openai/gpt-4o-mini, or a name under routes)")
	}
	p.AtLeast("agents.max_tool_iterations", int64(a.MaxToolIterations), 1)
	p.AtLeast("agents.memory_window", int64(a.MemoryWindow), 10)
	p.AtLeast("agents.max_concurrent_turns", int64(a.MaxConcurrentTurns), 1)
	p.AtLeast("agents.max_tokens", int64(a.MaxTokens), 0)
	p.AtLeast("agents.context_window", int64(a.ContextWindow), 1024)
	if a.MaxTokens >= a.ContextWindow && a.ContextWindow >= 1024 {
		p.Add("agents.max_tokens", "must be less than agents.context_window (%d), got %d", a.ContextWindow, a.MaxTokens)
	}
	if t := a.Temperature; t != nil && (*t < 0 || *t > 2) {
		p.Add("agents.temperature", "must be between 0 and 2, got %g (or remove it to use the model's default)", *t)
	}
	p.Positive("agents.tool_timeout", a.ToolTimeout)
	p.AtLeast("agents.max_tool_output", int64(a.MaxToolOutput), 100)
	p.AtLeast("agents.bootstrap_max_chars", int64(a.BootstrapMaxChars), 100)
	p.AtLeast("agents.max_input_chars", int64(a.MaxInputChars), 100)
	p.AtLeast("agents.session_cache", int64(a.SessionCache), 1)
	p.AtLeast("agents.session_cache_bytes", a.SessionCacheBytes, 1<<20)
	p.AtLeast("agents.max_queue", int64(a.MaxQueue), 1)
	p.AtLeast("agents.max_group_turns", int64(a.MaxGroupTurns), 0)
	if a.MaxGroupTurns > a.MaxConcurrentTurns && a.MaxConcurrentTurns >= 1 {
		p.Add("agents.max_group_turns", "must not exceed agents.max_concurrent_turns (%d), got %d (or 0 for max_concurrent_turns - 1)",
			a.MaxConcurrentTurns, a.MaxGroupTurns)
	}
	p.AtLeast("agents.max_turns_per_group", int64(a.MaxTurnsPerGroup), 0)
}

// entryName is what provider, route and MCP server names may be: they are
// written inside model strings and tool names (mcp_<server>_<tool>, which
// providers restrict to [A-Za-z0-9_-]).
var entryName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// headerName is an HTTP header field name (RFC 9110 token).
var headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// officialHosts are the endpoints that always need an API key; a custom
// base_url (Ollama, vLLM, a proxy) may not.
var officialHosts = map[string]string{
	"api.openai.com": "OPENAI_API_KEY", "api.anthropic.com": "ANTHROPIC_API_KEY",
	"generativelanguage.googleapis.com": "GEMINI_API_KEY",
}

// GeminiBaseURL is where a gemini provider without base_url is sent.
const GeminiBaseURL = "https://generativelanguage.googleapis.com"

func (c *Config) validateProviders(p *Problems) {
	used := map[string][]string{} // provider → keys that use it
	if c.Agents.Model != "" {
		p.model("agents.model", c.Agents.Model, c, used)
	}
	for i, f := range c.Agents.Fallbacks {
		p.model(fmt.Sprintf("agents.fallbacks[%d]", i), f, c, used)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Routes)) {
		for i, f := range c.Routes[name].Fallbacks {
			p.model(fmt.Sprintf("routes.%s.fallbacks[%d]", name, i), f, c, used)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Providers)) {
		pc := c.Providers[name]
		key := "providers." + name
		if !entryName.MatchString(name) {
			p.Add(key, "provider names may use only letters, digits, _ and - (they are written as name/model)")
		}
		kind := pc.Kind
		if kind == "" {
			kind = impliedKind(name)
		}
		switch {
		case kind == "":
			p.Add(key+".kind", "must be set for a provider not named openai, anthropic or gemini (kind: openai for OpenAI-compatible endpoints such as OpenRouter, Ollama or vLLM; kind: openai-responses for OpenAI's Responses API; kind: anthropic for the Messages API; kind: gemini for Google's Gemini API)")
		case !slices.Contains(ProviderKinds, kind):
			p.Add(key+".kind", "must be one of %s, got %q", strings.Join(ProviderKinds, ", "), kind)
		}
		if pc.Store && kind != "openai-responses" {
			p.Add(key+".store", "applies only to kind openai-responses (the Responses API), not %q", kind)
		}
		// A gemini provider has a default base_url; every other one needs
		// its own (there is no one default for OpenAI-compatible servers).
		p.HTTPURL(key+".base_url", pc.BaseURL, kind == "gemini")
		for _, h := range slices.Sorted(maps.Keys(pc.ExtraHeaders)) {
			if !headerName.MatchString(h) {
				p.Add(key+".extra_headers."+h, "is not a valid HTTP header name")
			}
		}
		p.Positive(key+".timeout", pc.Timeout)
		p.AtLeast(key+".max_retries", int64(pc.MaxRetries), 0)
		// An empty key is no configuration error: the provider starts
		// degraded and says what is missing (ProviderProblem), and the web
		// page can take the key.
	}
}

// telegramToken is a bot token's shape: the bot's numeric id, a colon and
// the secret (letters, digits, _ and -). discordToken is three base64url
// parts joined by dots (the bot's id, a timestamp, an HMAC).
func (c *Config) validateRoutes(p *Problems) {
	for _, name := range slices.Sorted(maps.Keys(c.Routes)) {
		rc := c.Routes[name]
		key := "routes." + name
		if !entryName.MatchString(name) {
			p.Add(key, "route names may use only letters, digits, _ and - (a name with / would read as provider/model)")
		}
		if rc.Model == "" {
			p.Add(key+".model", "must not be empty (write provider/model, e.g. openai/gpt-4o-mini)")
		} else if _, err := c.resolveDirect(rc.Model); err != nil {
			p.Add(key+".model", "%v (a route's model is provider/model, not another route)", err)
		}
		p.AtLeast(key+".context_window", int64(rc.ContextWindow), 0)
		p.AtLeast(key+".max_tokens", int64(rc.MaxTokens), 0)
	}
}

func validateHistory(p *Problems, h *HistoryConfig) {
	p.AtLeast("history.budget", int64(h.Budget), 0)
	if !(h.HighWater > 0 && h.HighWater <= 1) {
		p.Add("history.high_water", "must be more than 0 and at most 1 (a share of the budget), got %g", h.HighWater)
	}
	if !(h.LowWater > 0 && h.LowWater < h.HighWater) {
		p.Add("history.low_water", "must be more than 0 and less than history.high_water (%g), got %g", h.HighWater, h.LowWater)
	}
}

// Access checks a channel's access policy (channels.<channel>.policy,
// allow_from, group_policy, rate_per_minute); idHint says where a user finds
// their id.
func (p *Problems) Access(channel string, a *Access, enabled bool, idHint string) {
	key := "channels." + channel
	p.OneOf(key+".policy", a.Policy, "allowlist", "open", "pairing")
	p.OneOf(key+".group_policy", a.GroupPolicy, "mention", "open")
	for i, id := range a.AllowFrom {
		if strings.TrimSpace(id) == "" {
			p.Add(fmt.Sprintf("%s.allow_from[%d]", key, i), "must not be empty (write a user id, or \"*\")")
		}
	}
	// See docs/channels.md#inbound-access-pairingstore-intake-lanes. An empty
	// allowlist is a configuration error, never silent open access and never a
	// bot that ignores everyone without saying why.
	if enabled && a.Policy == "allowlist" && len(a.AllowFrom) == 0 {
		p.Add(key+".allow_from", "must not be empty when policy is allowlist (add your user id — %s — or use \"*\" or policy: pairing)", idHint)
	}
	p.AtLeast(key+".rate_per_minute", int64(a.RatePerMinute), 1)
}

// Output checks a channel's reply settings (edit_interval, typing_delay).
func (p *Problems) Output(channel string, o *OutputConfig) {
	p.Positive("channels."+channel+".edit_interval", o.EditInterval)
	if o.TypingDelay < 0 {
		p.Add("channels."+channel+".typing_delay", "must not be negative")
	}
}

func validateTranscription(p *Problems, t *TranscriptionConfig) {
	const key = "channels.transcription"
	p.HTTPURL(key+".base_url", t.BaseURL, true)
	if t.BaseURL != "" && t.Model == "" {
		p.Add(key+".model", "must be set when base_url is set (e.g. whisper-1)")
	}
}

func (c *Config) validateTools(p *Problems) {
	e := &c.Tools.Exec
	p.Positive("tools.exec.timeout", e.Timeout)
	p.AtLeast("tools.exec.max_output", int64(e.MaxOutput), 100)
	for i, pat := range e.DenyPatterns {
		if _, err := regexp.Compile(pat); err != nil {
			p.Add(fmt.Sprintf("tools.exec.deny_patterns[%d]", i), "is not a valid regular expression: %v", err)
		}
	}
	p.OneOf("tools.exec.sandbox", e.Sandbox, ExecSandboxAuto, ExecSandboxRequired, ExecSandboxOff)
	for i, port := range e.ConnectPorts {
		if port < 1 || port > 65535 {
			p.Add(fmt.Sprintf("tools.exec.connect_ports[%d]", i), "is %d; a TCP port is 1 to 65535", port)
		}
	}
	for i, x := range e.Expose {
		key := fmt.Sprintf("tools.exec.expose[%d]", i)
		if x.Path == "" {
			p.Add(key+".path", "must be set (a file or directory commands may reach, e.g. ~/.config/gh)")
		}
		if x.Mode != "" {
			p.OneOf(key+".mode", x.Mode, "ro", "rw")
		}
	}
	w := &c.Tools.Web
	p.OneOf("tools.web.search_provider", w.SearchProvider, "duckduckgo", "brave")
	if w.SearchProvider == "brave" && w.BraveAPIKey == "" {
		p.Add("tools.web.brave_api_key", "must be set when search_provider is brave (write brave_api_key: ${BRAVE_API_KEY}, or use duckduckgo)")
	}
	if w.MaxResults < 1 || w.MaxResults > 20 {
		p.Add("tools.web.max_results", "must be between 1 and 20, got %d", w.MaxResults)
	}
	p.AtLeast("tools.web.fetch_max_bytes", w.FetchMaxBytes, 1024)
	for _, name := range slices.Sorted(maps.Keys(c.Tools.MCPServers)) {
		validateMCPServer(p, name, c.Tools.MCPServers[name])
	}
}

func validateMCPServer(p *Problems, name string, s MCPServerConfig) {
	key := "tools.mcp_servers." + name
	if !entryName.MatchString(name) {
		p.Add(key, "server names may use only letters, digits, _ and - (tools are named mcp_<server>_<tool>)")
	}
	switch {
	case s.Command == "" && s.URL == "":
		p.Add(key, "needs command (a stdio server) or url (an HTTP server)")
	case s.Command != "" && s.URL != "":
		p.Add(key, "has both command and url (keep one: command starts a stdio server, url reaches an HTTP one)")
	case s.URL != "":
		p.HTTPURL(key+".url", s.URL, false)
		if len(s.Args) > 0 || len(s.Env) > 0 || s.Cwd != "" {
			p.Add(key, "args, env and cwd apply only to a command server (remove them, or use command)")
		}
	case len(s.Headers) > 0:
		p.Add(key+".headers", "apply only to an url server (remove them, or use url)")
	}
	for _, h := range slices.Sorted(maps.Keys(s.Headers)) {
		if !headerName.MatchString(h) {
			p.Add(key+".headers."+h, "is not a valid HTTP header name")
		}
	}
	p.Positive(key+".tool_timeout", s.ToolTimeout)
}

func validateGateway(p *Problems, g *GatewayConfig) {
	host, port, err := net.SplitHostPort(g.Listen)
	n, perr := strconv.Atoi(port)
	switch {
	case err != nil:
		p.Add("gateway.listen", "must be host:port (e.g. 127.0.0.1:18790, or :18790 for all interfaces), got %q", g.Listen)
	case perr != nil || n < 0 || n > 65535:
		p.Add("gateway.listen", "port must be a number from 0 to 65535, got %q", port)
	case strings.ContainsAny(host, " /"):
		p.Add("gateway.listen", "host %q is not a host name or IP address", host)
	}
	p.Positive("gateway.heartbeat.interval", g.Heartbeat.Interval)
	p.Positive("gateway.shutdown_grace", g.ShutdownGrace)
	p.Positive("gateway.idle_timeout", g.IdleTimeout)
	p.Positive("gateway.read_timeout", g.ReadTimeout)
	p.AtLeast("gateway.max_connections", int64(g.MaxConnections), 1)
	for _, h := range g.AllowedHosts {
		if h == "" || strings.ContainsAny(h, ":/ []") {
			p.Add("gateway.allowed_hosts", "%q is not a host name (write the name alone, e.g. nanobot.internal, without scheme or port)", h)
		}
	}
}

// apiKeyName is what a key's name may be, with at most 32 characters
// (validAPIKeyName): it is part of session keys and metric labels.
var apiKeyName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

func validAPIKeyName(s string) bool { return len(s) <= 32 && apiKeyName.MatchString(s) }

// minAPIKeyLen is the shortest bearer token accepted: a short one can be guessed.
const minAPIKeyLen = 16

func validateAPI(p *Problems, a *APIConfig) {
	seen := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(a.Keys)) {
		key := "api.keys." + name
		tok := a.Keys[name]
		switch {
		case !validAPIKeyName(name):
			p.Add(key, "name must be 1-32 characters a-z 0-9 _ - starting with a letter or digit")
		case tok == "":
			p.Add(key, "is empty (is its environment variable set? e.g. ${NANOBOT_API_KEY})")
		case len(tok) < minAPIKeyLen:
			p.Add(key, "must be at least %d characters (e.g. `openssl rand -hex 32`)", minAPIKeyLen)
		case seen[tok] != "":
			p.Add(key, "is the same token as api.keys.%s; give each client its own", seen[tok])
		}
		if tok != "" {
			seen[tok] = name
		}
	}
	p.AtLeast("api.rate_per_minute", int64(a.RatePerMinute), 1)
	p.AtLeast("api.burst", int64(a.Burst), 1)
	p.AtLeast("api.max_concurrent", int64(a.MaxConcurrent), 1)
	p.AtLeast("api.max_body_bytes", a.MaxBodyBytes, 1024)
	p.AtLeast("api.max_history_messages", int64(a.MaxHistoryMessages), 1)
	p.AtLeast("api.max_history_bytes", a.MaxHistoryBytes, 1024)
	p.AtLeast("api.max_images", int64(a.MaxImages), 1)
	p.Positive("api.turn_timeout", a.TurnTimeout)
}

// prefixPattern is what a NATS subject token and a stream name both accept.
var prefixPattern = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func validateBus(p *Problems, b *BusConfig) {
	p.OneOf("bus.backend", b.Backend, BusMemory, BusNATS)
	if b.Backend != BusNATS {
		return
	}
	n := &b.NATS
	if n.URL == "" {
		p.Add("bus.nats.url", "must not be empty with bus.backend: nats (write e.g. nats://127.0.0.1:4222)")
	}
	for _, u := range strings.Split(n.URL, ",") {
		if u = strings.TrimSpace(u); u != "" {
			if err := CheckURL(u, "nats", "tls", "ws", "wss"); err != nil {
				p.Add("bus.nats.url", "%v", err)
			}
		}
	}
	if !prefixPattern.MatchString(n.Prefix) {
		p.Add("bus.nats.prefix", "must be letters, digits, - or _ (it names subjects and streams), got %q", n.Prefix)
	}
	p.AtLeast("bus.nats.partitions", int64(n.Partitions), 1)
	if n.AckWait < time.Second {
		p.Add("bus.nats.ack_wait", "must be at least 1s (workers heartbeat every third of it), got %s", n.AckWait)
	}
	if n.LeaseTTL < time.Second {
		p.Add("bus.nats.lease_ttl", "must be at least 1s (the scheduler's leader renews its lease every third of it), got %s", n.LeaseTTL)
	}
	p.OneOf("bus.nats.sessions", n.Sessions, SessionsSharedVolume, SessionsJetStream)
	if (n.TLS.CertFile == "") != (n.TLS.KeyFile == "") {
		p.Add("bus.nats.tls", "cert_file and key_file go together (a client certificate needs its key)")
	}
}

func validateLog(p *Problems, l *LogConfig) {
	p.OneOf("log.level", l.Level, "debug", "info", "warn", "error")
	p.OneOf("log.format", l.Format, "auto", "console", "json")
}

// MinWebTokenLen is the shortest login token channels.web.token accepts.
const MinWebTokenLen = 16

// validateWeb checks the web page's keys. A non-loopback gateway.listen
// without allow_remote is not an error (the Docker image listens on
// 0.0.0.0 for its health check): the gateway then does not serve the page
// and says why in its log (see WebServed).
func validateWeb(p *Problems, w *WebChannelConfig) {
	const key = "channels.web"
	if !w.Enabled {
		return
	}
	if w.Token != "" && len(w.Token) < MinWebTokenLen {
		p.Add(key+".token", "must be at least %d characters (or empty to use the token file; `nanobot web token --rotate` makes one)", MinWebTokenLen)
	}
	p.Positive(key+".session_ttl", w.SessionTTL)
	p.AtLeast(key+".max_upload_bytes", w.MaxUploadBytes, 1)
	p.HTTPURL(key+".public_url", w.PublicURL, true)
	if _, err := ParseTrustedProxies(w.TrustedProxies); err != nil {
		p.Add(key+".trusted_proxies", "%v", err)
	}
}

// ParseTrustedProxies reads channels.web.trusted_proxies: IP addresses or
// CIDR ranges (an address stands for itself alone).
func ParseTrustedProxies(list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		s = strings.TrimSpace(s)
		if pfx, err := netip.ParsePrefix(s); err == nil {
			out = append(out, pfx.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an IP address nor a CIDR range (write e.g. 127.0.0.1 or 10.0.0.0/8)", s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// WebServed reports whether the gateway serves the web page on listen, and
// when it does not although enabled, why (a line for the log that names
// the key to set).
func (w WebChannelConfig) WebServed(listen string) (bool, string) {
	if !w.Enabled {
		return false, ""
	}
	host, _, err := net.SplitHostPort(listen)
	if err == nil && !IsLoopback(host) && !w.AllowRemote {
		return false, fmt.Sprintf("web page not served: gateway.listen %s is not a loopback address and "+
			"channels.web.allow_remote is false (set it to true and put the page behind TLS, or listen on 127.0.0.1)", listen)
	}
	return true, ""
}

// IsLoopback reports whether host (of a listen address) only accepts
// connections from this machine: localhost or a loopback IP. An empty host
// listens on every interface.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// within reports whether path is dir or lies under it, comparing cleaned
// absolute paths (symbolic links are not followed: the sandbox grants the
// workspace by its path).
func within(path, dir string) bool {
	rel, err := filepath.Rel(filepath.Clean(dir), filepath.Clean(path))
	return err == nil && (filepath.IsLocal(rel) || rel == ".")
}

// Origins are the callers a budget may limit (budget.origins), as
// internal/usage names them.
var Origins = []string{"turn", "api", "heartbeat", "cron", "consolidation", "subagent", "transcription"}

func (c *Config) validateUsage(p *Problems) {
	for _, key := range slices.Sorted(maps.Keys(c.Prices)) {
		pr := c.Prices[key]
		if prov, model, ok := strings.Cut(key, "/"); !ok || prov == "" || model == "" {
			p.Add("prices."+key, "must be a route model, provider/model (e.g. openai/gpt-4.1)")
		}
		for leaf, v := range map[string]float64{"input": pr.Input, "output": pr.Output, "cache_read": pr.CacheRead, "cache_write": pr.CacheWrite, "per_minute": pr.PerMinute} {
			if v < 0 {
				p.Add("prices."+key+"."+leaf, "must not be negative, got %g", v)
			}
		}
	}
	b := &c.Budget
	limits := func(key string, l LimitsConfig) {
		if l.Daily < 0 {
			p.Add(key+".daily", "must not be negative (0 is no limit), got %g", l.Daily)
		}
		if l.Monthly < 0 {
			p.Add(key+".monthly", "must not be negative (0 is no limit), got %g", l.Monthly)
		}
	}
	limits("budget", LimitsConfig{Daily: b.Daily, Monthly: b.Monthly})
	limits("budget.per_chat", b.PerChat)
	for _, chat := range slices.Sorted(maps.Keys(b.Chats)) {
		if !strings.Contains(chat, ":") {
			p.Add("budget.chats."+chat, "must name a chat as channel:chat_id (e.g. telegram:123456789)")
		}
		limits("budget.chats."+chat, b.Chats[chat])
	}
	for _, o := range slices.Sorted(maps.Keys(b.Origins)) {
		if !slices.Contains(Origins, o) {
			p.Add("budget.origins."+o, "must be one of %s", strings.Join(Origins, ", "))
		}
		limits("budget.origins."+o, b.Origins[o])
	}
	if !(b.WarnAt >= 0 && b.WarnAt <= 1) {
		p.Add("budget.warn_at", "must be between 0 and 1 (a share of the limit; 0 never warns), got %g", b.WarnAt)
	}
	if b.Timezone != "" {
		if _, err := time.LoadLocation(b.Timezone); err != nil {
			if _, probe := time.LoadLocation("America/New_York"); probe != nil {
				// The binary embeds no zone data (docs/usage.md): the system's is missing.
				p.Add("budget.timezone", "%q cannot be used: this machine has no time zone data (install the tzdata package), or use UTC", b.Timezone)
			} else {
				p.Add("budget.timezone", "must be an IANA time zone such as Europe/Berlin or UTC, got %q", b.Timezone)
			}
		}
	}
	if b.Reroute != "" {
		if _, err := c.ResolveRoute(b.Reroute); err != nil {
			p.Add("budget.reroute", "%v", err)
		}
	}
	if b.Owner != "" && !strings.Contains(b.Owner, ":") {
		p.Add("budget.owner", "must name a chat as channel:chat_id (e.g. telegram:123456789), got %q", b.Owner)
	}
	u := &c.Usage
	switch {
	case u.Dir == "":
		p.Add("usage.dir", "must not be empty (the default is usage, next to the config file)")
	case c.Agents.Workspace != "" && within(u.Dir, c.Agents.Workspace):
		p.Add("usage.dir", "must be outside agents.workspace (%s), where the tools cannot reach it; got %s", c.Agents.Workspace, u.Dir)
	}
	if u.Retention < 0 {
		p.Add("usage.retention", "must not be negative (0 keeps every record), got %s", u.Retention)
	}
	if u.SyncEvery < 0 {
		p.Add("usage.sync_every", "must not be negative (0 syncs every record), got %s", u.SyncEvery)
	}
}
