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
	var p checker
	c.validateAgents(&p)
	validateHistory(&p, &c.History)
	c.validateProviders(&p)
	c.validateRoutes(&p)
	validateTelegram(&p, &c.Channels.Telegram, c.ChannelProblem("telegram") != "")
	validateDiscord(&p, &c.Channels.Discord, c.ChannelProblem("discord") != "")
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

// checker collects problems; each method adds one when its check fails.
type checker []error

func (p *checker) add(key, format string, args ...any) {
	*p = append(*p, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
}

func (p *checker) atLeast(key string, v, lo int64) {
	if v < lo {
		p.add(key, "must be at least %d, got %d", lo, v)
	}
}

func (p *checker) positive(key string, d time.Duration) {
	if d <= 0 {
		p.add(key, "must be a positive duration, got %s (write e.g. 30s or 5m)", d)
	}
}

func (p *checker) oneOf(key, v string, allowed ...string) {
	if !slices.Contains(allowed, v) {
		p.add(key, "must be one of %s, got %q", strings.Join(allowed, ", "), v)
	}
}

// httpURL checks an http(s) URL with a host; empty is allowed only when
// optional.
func (p *checker) httpURL(key, v string, optional bool) {
	if v == "" {
		if !optional {
			p.add(key, "must not be empty (write an http:// or https:// URL)")
		}
		return
	}
	if err := checkURL(v, "http", "https"); err != nil {
		p.add(key, "%v", err)
	}
}

func checkURL(v string, schemes ...string) error {
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

func (p *checker) model(key, s string, c *Config, used map[string][]string) {
	r, err := c.ResolveRoute(s)
	if err != nil {
		p.add(key, "%v", err)
		return
	}
	used[r.Provider] = append(used[r.Provider], key)
}

func (c *Config) validateAgents(p *checker) {
	a := &c.Agents
	if a.Workspace == "" {
		p.add("agents.workspace", "must not be empty (write e.g. ~/.nanobot/workspace)")
	}
	switch {
	case a.SessionsDir == "":
		p.add("agents.sessions_dir", "must not be empty (the default is sessions, next to the config file)")
	case a.Workspace != "" && within(a.SessionsDir, a.Workspace):
		p.add("agents.sessions_dir", "must be outside agents.workspace (%s), where the tools cannot reach it; got %s", a.Workspace, a.SessionsDir)
	case a.Workspace != "" && within(a.Workspace, a.SessionsDir):
		// The tools refuse everything under the sessions dir: the whole
		// workspace would be off limits.
		p.add("agents.sessions_dir", "must not contain agents.workspace (%s); got %s", a.Workspace, a.SessionsDir)
	}
	if a.Model == "" {
		p.add("agents.model", "must not be empty (write provider/model, e.g. openai/gpt-4o-mini, or a name under routes)")
	}
	p.atLeast("agents.max_tool_iterations", int64(a.MaxToolIterations), 1)
	p.atLeast("agents.memory_window", int64(a.MemoryWindow), 10)
	p.atLeast("agents.max_concurrent_turns", int64(a.MaxConcurrentTurns), 1)
	p.atLeast("agents.max_tokens", int64(a.MaxTokens), 0)
	p.atLeast("agents.context_window", int64(a.ContextWindow), 1024)
	if a.MaxTokens >= a.ContextWindow && a.ContextWindow >= 1024 {
		p.add("agents.max_tokens", "must be less than agents.context_window (%d), got %d", a.ContextWindow, a.MaxTokens)
	}
	if t := a.Temperature; t != nil && (*t < 0 || *t > 2) {
		p.add("agents.temperature", "must be between 0 and 2, got %g (or remove it to use the model's default)", *t)
	}
	p.positive("agents.tool_timeout", a.ToolTimeout)
	p.atLeast("agents.max_tool_output", int64(a.MaxToolOutput), 100)
	p.atLeast("agents.bootstrap_max_chars", int64(a.BootstrapMaxChars), 100)
	p.atLeast("agents.max_input_chars", int64(a.MaxInputChars), 100)
	p.atLeast("agents.session_cache", int64(a.SessionCache), 1)
	p.atLeast("agents.session_cache_bytes", a.SessionCacheBytes, 1<<20)
	p.atLeast("agents.max_queue", int64(a.MaxQueue), 1)
	p.atLeast("agents.max_group_turns", int64(a.MaxGroupTurns), 0)
	if a.MaxGroupTurns > a.MaxConcurrentTurns && a.MaxConcurrentTurns >= 1 {
		p.add("agents.max_group_turns", "must not exceed agents.max_concurrent_turns (%d), got %d (or 0 for max_concurrent_turns - 1)",
			a.MaxConcurrentTurns, a.MaxGroupTurns)
	}
	p.atLeast("agents.max_turns_per_group", int64(a.MaxTurnsPerGroup), 0)
}

// entryName is what provider, route and MCP server names may be: they are
// written inside model strings and tool names (mcp_<server>_<tool>, which
// providers restrict to [A-Za-z0-9_-]).
var entryName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// headerName is an HTTP header field name (RFC 9110 token).
var headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

func (c *Config) validateProviders(p *checker) {
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
			p.add(key, "provider names may use only letters, digits, _ and - (they are written as name/model)")
		}
		kind := kindOf(name, pc)
		row, known := LookupProviderKind(kind)
		switch {
		case kind == "":
			p.add(key+".kind", "must be set for a provider not named %s (%s)", orList(ProviderKindNames()), kindHelp())
		case !known:
			p.add(key+".kind", "must be one of %s, got %q", strings.Join(ProviderKindNames(), ", "), kind)
		}
		if pc.Store && known && !row.Accepts("store") {
			p.add(key+".store", "applies only to kind %s, not %q", orList(kindsAccepting("store")), kind)
		}
		// An entry of a kind one vendor serves, or named after its kind,
		// has a default base_url; every other one needs its own (there is
		// no one default for OpenAI-compatible servers).
		p.httpURL(key+".base_url", pc.BaseURL, defaultBaseURL(name, kind) != "")
		for _, h := range slices.Sorted(maps.Keys(pc.ExtraHeaders)) {
			if !headerName.MatchString(h) {
				p.add(key+".extra_headers."+h, "is not a valid HTTP header name")
			}
		}
		p.positive(key+".timeout", pc.Timeout)
		p.atLeast(key+".max_retries", int64(pc.MaxRetries), 0)
		// An empty key is no configuration error: the provider starts
		// degraded and says what is missing (ProviderProblem), and the web
		// page can take the key.
	}
}

// telegramToken is a bot token's shape: the bot's numeric id, a colon and
// the secret (letters, digits, _ and -). discordToken is three base64url
// parts joined by dots (the bot's id, a timestamp, an HMAC).
var (
	telegramToken = regexp.MustCompile(`^[0-9]+:[A-Za-z0-9_-]+$`)
	discordToken  = regexp.MustCompile(`^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$`)
)

// ValidTelegramToken reports whether s has the shape of a Telegram bot
// token (123456789:AAF…); whether Telegram accepts it only getMe tells.
func ValidTelegramToken(s string) bool { return len(s) <= 256 && telegramToken.MatchString(s) }

// ValidDiscordToken reports whether s (with or without "Bot ") has the
// shape of a Discord bot token; whether Discord accepts it only users/@me
// tells.
func ValidDiscordToken(s string) bool {
	s = strings.TrimPrefix(strings.TrimSpace(s), "Bot ")
	return len(s) <= 256 && discordToken.MatchString(s)
}

func (c *Config) validateRoutes(p *checker) {
	for _, name := range slices.Sorted(maps.Keys(c.Routes)) {
		rc := c.Routes[name]
		key := "routes." + name
		if !entryName.MatchString(name) {
			p.add(key, "route names may use only letters, digits, _ and - (a name with / would read as provider/model)")
		}
		if rc.Model == "" {
			p.add(key+".model", "must not be empty (write provider/model, e.g. openai/gpt-4o-mini)")
		} else if _, err := c.resolveDirect(rc.Model); err != nil {
			p.add(key+".model", "%v (a route's model is provider/model, not another route)", err)
		}
		p.atLeast(key+".context_window", int64(rc.ContextWindow), 0)
		p.atLeast(key+".max_tokens", int64(rc.MaxTokens), 0)
	}
}

func validateHistory(p *checker, h *HistoryConfig) {
	p.atLeast("history.budget", int64(h.Budget), 0)
	if !(h.HighWater > 0 && h.HighWater <= 1) {
		p.add("history.high_water", "must be more than 0 and at most 1 (a share of the budget), got %g", h.HighWater)
	}
	if !(h.LowWater > 0 && h.LowWater < h.HighWater) {
		p.add("history.low_water", "must be more than 0 and less than history.high_water (%g), got %g", h.HighWater, h.LowWater)
	}
}

func validateAccess(p *checker, channel string, a *Access, enabled bool, idHint string) {
	key := "channels." + channel
	p.oneOf(key+".policy", a.Policy, "allowlist", "open", "pairing")
	p.oneOf(key+".group_policy", a.GroupPolicy, "mention", "open")
	for i, id := range a.AllowFrom {
		if strings.TrimSpace(id) == "" {
			p.add(fmt.Sprintf("%s.allow_from[%d]", key, i), "must not be empty (write a user id, or \"*\")")
		}
	}
	// See docs/channels.md#inbound-access-pairingstore-intake-lanes. An empty
	// allowlist is a configuration error, never silent open access and never a
	// bot that ignores everyone without saying why.
	if enabled && a.Policy == "allowlist" && len(a.AllowFrom) == 0 {
		p.add(key+".allow_from", "must not be empty when policy is allowlist (add your user id — %s — or use \"*\" or policy: pairing)", idHint)
	}
	p.atLeast(key+".rate_per_minute", int64(a.RatePerMinute), 1)
}

func validateOutput(p *checker, channel string, o *OutputConfig) {
	p.positive("channels."+channel+".edit_interval", o.EditInterval)
	if o.TypingDelay < 0 {
		p.add("channels."+channel+".typing_delay", "must not be negative")
	}
}

// telegramSecret is what Telegram accepts as a webhook secret_token: 1-256 of
// these characters. Here and below the length is checked apart from the
// pattern: a counted repetition such as {1,256} compiles into a program with
// an instruction per repeat, a quarter of a megabyte allocated at every start.
var telegramSecret = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func validTelegramSecret(s string) bool { return len(s) <= 256 && telegramSecret.MatchString(s) }

func validateTelegram(p *checker, t *TelegramConfig, unset bool) {
	const key = "channels.telegram"
	// A token whose variable is unset is no configuration error: the
	// channel starts degraded (ChannelProblem). One that cannot be a token
	// is.
	switch {
	case t.Enabled && t.Token == "" && !unset:
		p.add(key+".token", "must be set when the channel is enabled (create a bot with @BotFather; write token: ${TELEGRAM_BOT_TOKEN})")
	case t.Token != "" && !ValidTelegramToken(t.Token):
		p.add(key+".token", "is not a Telegram bot token: it is <bot id>:<secret>, such as 123456789:AAF… (copy it whole from @BotFather)")
	}
	p.httpURL(key+".api_url", t.APIURL, false)
	validateAccess(p, "telegram", &t.Access, t.Enabled, "the bot answers /whoami with it")
	validateOutput(p, "telegram", &t.OutputConfig)
	p.oneOf(key+".mode", t.Mode, "polling", "webhook")
	if t.Mode == "webhook" {
		validateWebhook(p, t)
	}
	if t.Proxy != "" {
		if err := checkURL(t.Proxy, "http", "https", "socks5", "socks5h"); err != nil {
			p.add(key+".proxy", "%v", err)
		}
	}
	if t.PollTimeout < time.Second {
		p.add(key+".poll_timeout", "must be at least 1s (Telegram counts whole seconds), got %s", t.PollTimeout)
	}
	p.positive(key+".stall_grace", t.StallGrace)
	p.atLeast(key+".max_media_bytes", t.MaxMediaBytes, 1)
}

func validateWebhook(p *checker, t *TelegramConfig) {
	const key = "channels.telegram"
	switch u, err := url.Parse(t.WebhookURL); {
	case t.WebhookURL == "":
		p.add(key+".webhook_url", "must be set when mode is webhook (the public https URL that reaches gateway.listen)")
	case err != nil || u.Scheme != "https" || u.Host == "":
		p.add(key+".webhook_url", "must be an https URL with a host (Telegram only posts to https), got %q", t.WebhookURL)
	case u.Port() != "" && !slices.Contains([]string{"443", "80", "88", "8443"}, u.Port()):
		p.add(key+".webhook_url", "port must be 443, 80, 88 or 8443 (the ports Telegram posts to), got %s", u.Port())
	}
	switch {
	case t.WebhookSecret == "":
		p.add(key+".webhook_secret", "must be set when mode is webhook (1-256 characters A-Z a-z 0-9 _ -; e.g. from `openssl rand -hex 32`)")
	case !validTelegramSecret(t.WebhookSecret):
		p.add(key+".webhook_secret", "may use only A-Z a-z 0-9 _ - and at most 256 characters (Telegram's rule; e.g. from `openssl rand -hex 32`)")
	}
}

func validateDiscord(p *checker, d *DiscordConfig, unset bool) {
	const key = "channels.discord"
	switch {
	case d.Enabled && d.Token == "" && !unset:
		p.add(key+".token", "must be set when the channel is enabled (the bot token from the Discord developer portal; write token: ${DISCORD_BOT_TOKEN})")
	case d.Token != "" && !ValidDiscordToken(d.Token):
		p.add(key+".token", "is not a Discord bot token: it is three dot-separated parts, such as MTIz….GhIj….kLmN… (Bot, on the developer portal: Reset Token, then copy it whole)")
	}
	p.httpURL(key+".api_url", d.APIURL, false)
	validateAccess(p, "discord", &d.Access, d.Enabled, "the bot answers /whoami with it, or copy it with Developer Mode on")
	validateOutput(p, "discord", &d.OutputConfig)
	for _, list := range []struct {
		name string
		ids  []string
	}{{"allow_guilds", d.AllowGuilds}, {"allow_channels", d.AllowChannels}, {"allow_roles", d.AllowRoles}} {
		for i, id := range list.ids {
			if strings.TrimSpace(id) == "" {
				p.add(fmt.Sprintf("%s.%s[%d]", key, list.name, i), "must not be empty (write an id)")
			}
		}
	}
	p.atLeast(key+".max_media_bytes", d.MaxMediaBytes, 1)
	if d.CatchUp < 0 {
		p.add(key+".catch_up", "must not be negative (0 turns catching up off; e.g. 24h)")
	}
}

func validateTranscription(p *checker, t *TranscriptionConfig) {
	const key = "channels.transcription"
	p.httpURL(key+".base_url", t.BaseURL, true)
	if t.BaseURL != "" && t.Model == "" {
		p.add(key+".model", "must be set when base_url is set (e.g. whisper-1)")
	}
}

func (c *Config) validateTools(p *checker) {
	e := &c.Tools.Exec
	p.positive("tools.exec.timeout", e.Timeout)
	p.atLeast("tools.exec.max_output", int64(e.MaxOutput), 100)
	for i, pat := range e.DenyPatterns {
		if _, err := regexp.Compile(pat); err != nil {
			p.add(fmt.Sprintf("tools.exec.deny_patterns[%d]", i), "is not a valid regular expression: %v", err)
		}
	}
	p.oneOf("tools.exec.sandbox", e.Sandbox, ExecSandboxAuto, ExecSandboxRequired, ExecSandboxOff)
	for i, port := range e.ConnectPorts {
		if port < 1 || port > 65535 {
			p.add(fmt.Sprintf("tools.exec.connect_ports[%d]", i), "is %d; a TCP port is 1 to 65535", port)
		}
	}
	for i, x := range e.Expose {
		key := fmt.Sprintf("tools.exec.expose[%d]", i)
		if x.Path == "" {
			p.add(key+".path", "must be set (a file or directory commands may reach, e.g. ~/.config/gh)")
		}
		if x.Mode != "" {
			p.oneOf(key+".mode", x.Mode, "ro", "rw")
		}
	}
	w := &c.Tools.Web
	p.oneOf("tools.web.search_provider", w.SearchProvider, "duckduckgo", "brave")
	if w.SearchProvider == "brave" && w.BraveAPIKey == "" {
		p.add("tools.web.brave_api_key", "must be set when search_provider is brave (write brave_api_key: ${BRAVE_API_KEY}, or use duckduckgo)")
	}
	if w.MaxResults < 1 || w.MaxResults > 20 {
		p.add("tools.web.max_results", "must be between 1 and 20, got %d", w.MaxResults)
	}
	p.atLeast("tools.web.fetch_max_bytes", w.FetchMaxBytes, 1024)
	for _, name := range slices.Sorted(maps.Keys(c.Tools.MCPServers)) {
		validateMCPServer(p, name, c.Tools.MCPServers[name])
	}
}

func validateMCPServer(p *checker, name string, s MCPServerConfig) {
	key := "tools.mcp_servers." + name
	if !entryName.MatchString(name) {
		p.add(key, "server names may use only letters, digits, _ and - (tools are named mcp_<server>_<tool>)")
	}
	switch {
	case s.Command == "" && s.URL == "":
		p.add(key, "needs command (a stdio server) or url (an HTTP server)")
	case s.Command != "" && s.URL != "":
		p.add(key, "has both command and url (keep one: command starts a stdio server, url reaches an HTTP one)")
	case s.URL != "":
		p.httpURL(key+".url", s.URL, false)
		if len(s.Args) > 0 || len(s.Env) > 0 || s.Cwd != "" {
			p.add(key, "args, env and cwd apply only to a command server (remove them, or use command)")
		}
	case len(s.Headers) > 0:
		p.add(key+".headers", "apply only to an url server (remove them, or use url)")
	}
	for _, h := range slices.Sorted(maps.Keys(s.Headers)) {
		if !headerName.MatchString(h) {
			p.add(key+".headers."+h, "is not a valid HTTP header name")
		}
	}
	p.positive(key+".tool_timeout", s.ToolTimeout)
}

func validateGateway(p *checker, g *GatewayConfig) {
	host, port, err := net.SplitHostPort(g.Listen)
	n, perr := strconv.Atoi(port)
	switch {
	case err != nil:
		p.add("gateway.listen", "must be host:port (e.g. 127.0.0.1:18790, or :18790 for all interfaces), got %q", g.Listen)
	case perr != nil || n < 0 || n > 65535:
		p.add("gateway.listen", "port must be a number from 0 to 65535, got %q", port)
	case strings.ContainsAny(host, " /"):
		p.add("gateway.listen", "host %q is not a host name or IP address", host)
	}
	p.positive("gateway.heartbeat.interval", g.Heartbeat.Interval)
	p.positive("gateway.shutdown_grace", g.ShutdownGrace)
	p.positive("gateway.idle_timeout", g.IdleTimeout)
	p.positive("gateway.read_timeout", g.ReadTimeout)
	p.atLeast("gateway.max_connections", int64(g.MaxConnections), 1)
	for _, h := range g.AllowedHosts {
		if h == "" || strings.ContainsAny(h, ":/ []") {
			p.add("gateway.allowed_hosts", "%q is not a host name (write the name alone, e.g. nanobot.internal, without scheme or port)", h)
		}
	}
}

// apiKeyName is what a key's name may be, with at most 32 characters
// (validAPIKeyName): it is part of session keys and metric labels.
var apiKeyName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

func validAPIKeyName(s string) bool { return len(s) <= 32 && apiKeyName.MatchString(s) }

// minAPIKeyLen is the shortest bearer token accepted: a short one can be guessed.
const minAPIKeyLen = 16

func validateAPI(p *checker, a *APIConfig) {
	seen := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(a.Keys)) {
		key := "api.keys." + name
		tok := a.Keys[name]
		switch {
		case !validAPIKeyName(name):
			p.add(key, "name must be 1-32 characters a-z 0-9 _ - starting with a letter or digit")
		case tok == "":
			p.add(key, "is empty (is its environment variable set? e.g. ${NANOBOT_API_KEY})")
		case len(tok) < minAPIKeyLen:
			p.add(key, "must be at least %d characters (e.g. `openssl rand -hex 32`)", minAPIKeyLen)
		case seen[tok] != "":
			p.add(key, "is the same token as api.keys.%s; give each client its own", seen[tok])
		}
		if tok != "" {
			seen[tok] = name
		}
	}
	p.atLeast("api.rate_per_minute", int64(a.RatePerMinute), 1)
	p.atLeast("api.burst", int64(a.Burst), 1)
	p.atLeast("api.max_concurrent", int64(a.MaxConcurrent), 1)
	p.atLeast("api.max_body_bytes", a.MaxBodyBytes, 1024)
	p.atLeast("api.max_history_messages", int64(a.MaxHistoryMessages), 1)
	p.atLeast("api.max_history_bytes", a.MaxHistoryBytes, 1024)
	p.atLeast("api.max_images", int64(a.MaxImages), 1)
	p.positive("api.turn_timeout", a.TurnTimeout)
}

// prefixPattern is what a NATS subject token and a stream name both accept.
var prefixPattern = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func validateBus(p *checker, b *BusConfig) {
	p.oneOf("bus.backend", b.Backend, BusMemory, BusNATS)
	if b.Backend != BusNATS {
		return
	}
	n := &b.NATS
	if n.URL == "" {
		p.add("bus.nats.url", "must not be empty with bus.backend: nats (write e.g. nats://127.0.0.1:4222)")
	}
	for _, u := range strings.Split(n.URL, ",") {
		if u = strings.TrimSpace(u); u != "" {
			if err := checkURL(u, "nats", "tls", "ws", "wss"); err != nil {
				p.add("bus.nats.url", "%v", err)
			}
		}
	}
	if !prefixPattern.MatchString(n.Prefix) {
		p.add("bus.nats.prefix", "must be letters, digits, - or _ (it names subjects and streams), got %q", n.Prefix)
	}
	p.atLeast("bus.nats.partitions", int64(n.Partitions), 1)
	if n.AckWait < time.Second {
		p.add("bus.nats.ack_wait", "must be at least 1s (workers heartbeat every third of it), got %s", n.AckWait)
	}
	if n.LeaseTTL < time.Second {
		p.add("bus.nats.lease_ttl", "must be at least 1s (the scheduler's leader renews its lease every third of it), got %s", n.LeaseTTL)
	}
	p.oneOf("bus.nats.sessions", n.Sessions, SessionsSharedVolume, SessionsJetStream)
	if (n.TLS.CertFile == "") != (n.TLS.KeyFile == "") {
		p.add("bus.nats.tls", "cert_file and key_file go together (a client certificate needs its key)")
	}
}

func validateLog(p *checker, l *LogConfig) {
	p.oneOf("log.level", l.Level, "debug", "info", "warn", "error")
	p.oneOf("log.format", l.Format, "auto", "console", "json")
}

// MinWebTokenLen is the shortest login token channels.web.token accepts.
const MinWebTokenLen = 16

// validateWeb checks the web page's keys. A non-loopback gateway.listen
// without allow_remote is not an error (the Docker image listens on
// 0.0.0.0 for its health check): the gateway then does not serve the page
// and says why in its log (see WebServed).
func validateWeb(p *checker, w *WebChannelConfig) {
	const key = "channels.web"
	if !w.Enabled {
		return
	}
	if w.Token != "" && len(w.Token) < MinWebTokenLen {
		p.add(key+".token", "must be at least %d characters (or empty to use the token file; `nanobot web token --rotate` makes one)", MinWebTokenLen)
	}
	p.positive(key+".session_ttl", w.SessionTTL)
	p.atLeast(key+".max_upload_bytes", w.MaxUploadBytes, 1)
	p.httpURL(key+".public_url", w.PublicURL, true)
	if _, err := ParseTrustedProxies(w.TrustedProxies); err != nil {
		p.add(key+".trusted_proxies", "%v", err)
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

func (c *Config) validateUsage(p *checker) {
	for _, key := range slices.Sorted(maps.Keys(c.Prices)) {
		pr := c.Prices[key]
		if prov, model, ok := strings.Cut(key, "/"); !ok || prov == "" || model == "" {
			p.add("prices."+key, "must be a route model, provider/model (e.g. openai/gpt-4.1)")
		}
		for leaf, v := range map[string]float64{"input": pr.Input, "output": pr.Output, "cache_read": pr.CacheRead, "cache_write": pr.CacheWrite, "per_minute": pr.PerMinute} {
			if v < 0 {
				p.add("prices."+key+"."+leaf, "must not be negative, got %g", v)
			}
		}
	}
	b := &c.Budget
	limits := func(key string, l LimitsConfig) {
		if l.Daily < 0 {
			p.add(key+".daily", "must not be negative (0 is no limit), got %g", l.Daily)
		}
		if l.Monthly < 0 {
			p.add(key+".monthly", "must not be negative (0 is no limit), got %g", l.Monthly)
		}
	}
	limits("budget", LimitsConfig{Daily: b.Daily, Monthly: b.Monthly})
	limits("budget.per_chat", b.PerChat)
	for _, chat := range slices.Sorted(maps.Keys(b.Chats)) {
		if !strings.Contains(chat, ":") {
			p.add("budget.chats."+chat, "must name a chat as channel:chat_id (e.g. telegram:123456789)")
		}
		limits("budget.chats."+chat, b.Chats[chat])
	}
	for _, o := range slices.Sorted(maps.Keys(b.Origins)) {
		if !slices.Contains(Origins, o) {
			p.add("budget.origins."+o, "must be one of %s", strings.Join(Origins, ", "))
		}
		limits("budget.origins."+o, b.Origins[o])
	}
	if !(b.WarnAt >= 0 && b.WarnAt <= 1) {
		p.add("budget.warn_at", "must be between 0 and 1 (a share of the limit; 0 never warns), got %g", b.WarnAt)
	}
	if b.Timezone != "" {
		if _, err := time.LoadLocation(b.Timezone); err != nil {
			p.add("budget.timezone", "must be an IANA time zone such as Europe/Berlin or UTC, got %q", b.Timezone)
		}
	}
	if b.Reroute != "" {
		if _, err := c.ResolveRoute(b.Reroute); err != nil {
			p.add("budget.reroute", "%v", err)
		}
	}
	if b.Owner != "" && !strings.Contains(b.Owner, ":") {
		p.add("budget.owner", "must name a chat as channel:chat_id (e.g. telegram:123456789), got %q", b.Owner)
	}
	u := &c.Usage
	switch {
	case u.Dir == "":
		p.add("usage.dir", "must not be empty (the default is usage, next to the config file)")
	case c.Agents.Workspace != "" && within(u.Dir, c.Agents.Workspace):
		p.add("usage.dir", "must be outside agents.workspace (%s), where the tools cannot reach it; got %s", c.Agents.Workspace, u.Dir)
	}
	if u.Retention < 0 {
		p.add("usage.retention", "must not be negative (0 keeps every record), got %s", u.Retention)
	}
	if u.SyncEvery < 0 {
		p.add("usage.sync_every", "must not be negative (0 syncs every record), got %s", u.SyncEvery)
	}
}
