package config

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// validBase is a configuration that passes Validate; each case below breaks
// (or legitimately varies) one thing.
const validBase = `
agents:
  workspace: /srv/nanobot
providers:
  openai:
    api_key: sk-test-0123456789
  ollama:
    kind: openai
    base_url: http://localhost:11434/v1
routes:
  fast:
    model: ollama/llama3.2
    fallbacks: [openai/gpt-4o-mini]
channels:
  telegram:
    enabled: true
    token: "123:abc"
    allow_from: ["42"]
  discord:
    enabled: true
    token: MTIzNDU2Nzg5MDEyMzQ1Njc4.GaBcDe.discord-token-0123456789abcdef
    allow_from: ["80351110224678912"]
tools:
  mcp_servers:
    local: {command: mcp-local}
    remote: {url: "https://mcp.example.com/mcp"}
`

func baseConfig(t *testing.T) *Config {
	t.Helper()
	isolateEnv(t)
	return mustLoad(t, validBase)
}

func TestValidBaseIsValid(t *testing.T) {
	if err := baseConfig(t).Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
}

func TestValidateAcceptsVariations(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *Config)
	}{
		{"model is a route", func(c *Config) { c.Agents.Model = "fast" }},
		{"model id with slashes", func(c *Config) { c.Agents.Model = "ollama/library/llama3.2:8b" }},
		{"fallback is a route", func(c *Config) { c.Agents.Fallbacks = []string{"fast"} }},
		// A missing key is a degraded provider (ProviderProblem), not a
		// configuration error: the gateway starts and the page takes the key.
		{"official endpoint in use without key", func(c *Config) {
			p := c.Providers["openai"]
			p.APIKey = ""
			c.Providers["openai"] = p
		}},
		{"gemini in use without key", func(c *Config) {
			c.Providers["gemini"] = ProviderConfig{Timeout: time.Minute}
			c.Agents.Fallbacks = []string{"gemini/gemini-2.5-flash"}
		}},
		{"telegram token from an unset variable", func(c *Config) {
			set(c, "channels.telegram.token", "")
			c.SecretVars = map[string]SecretVar{"channels.telegram.token": {Name: "TELEGRAM_BOT_TOKEN"}}
		}},
		{"discord token with Bot prefix", func(c *Config) { set(c, "channels.discord.token", "Bot MTIz.GaBc.def-_0") }},
		{"unused official provider without key", func(c *Config) {
			c.Agents.Model = "ollama/llama3.2"
			c.Routes = nil
			p := c.Providers["openai"]
			p.APIKey = ""
			c.Providers["openai"] = p
		}},
		{"gemini named gemini needs no kind nor base_url", func(c *Config) {
			c.Providers["gemini"] = ProviderConfig{APIKey: "k", Timeout: time.Minute}
			c.Agents.Fallbacks = []string{"gemini/gemini-2.5-flash"}
		}},
		{"gemini kind under another name", func(c *Config) {
			c.Providers["google"] = ProviderConfig{Kind: "gemini", APIKey: "k", Timeout: time.Minute}
			c.Agents.Fallbacks = []string{"google/gemini-2.5-flash"}
		}},
		{"open policy without allow_from", func(c *Config) {
			set(c, "channels.telegram.policy", "open")
			set(c, "channels.telegram.allow_from", nil)
		}},
		{"pairing policy without allow_from", func(c *Config) {
			set(c, "channels.discord.policy", "pairing")
			set(c, "channels.discord.allow_from", nil)
		}},
		{"star allows everyone", func(c *Config) { set(c, "channels.telegram.allow_from", []string{"*"}) }},
		{"disabled channel with empty allowlist and no token", func(c *Config) {
			// The defaults, which a new key joins without this test changing.
			c.Channels.Kinds["telegram"] = Defaults(testSections...).Channels.Kinds["telegram"]
		}},
		{"webhook mode", func(c *Config) {
			set(c, "channels.telegram.mode", "webhook")
			set(c, "channels.telegram.webhook_url", "https://bot.example.com:8443/telegram")
			set(c, "channels.telegram.webhook_secret", "abc_DEF-123")
		}},
		{"socks proxy", func(c *Config) { set(c, "channels.telegram.proxy", "socks5://user:pw@127.0.0.1:1080") }},
		{"listen on all interfaces, any port", func(c *Config) { c.Gateway.Listen = ":0" }},
		{"brave with key", func(c *Config) {
			c.Tools.Web.SearchProvider = "brave"
			c.Tools.Web.BraveAPIKey = "brave-key"
		}},
		{"transcription", func(c *Config) { c.Channels.Transcription.BaseURL = "https://api.groq.com/openai/v1" }},
		{"temperature", func(c *Config) { t := 0.0; c.Agents.Temperature = &t }},
		{"all turns for groups", func(c *Config) { c.Agents.MaxGroupTurns = c.Agents.MaxConcurrentTurns }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := baseConfig(t)
			tt.mutate(c)
			if err := c.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

func TestValidateRules(t *testing.T) {
	setProvider := func(name string, f func(p *ProviderConfig)) func(c *Config) {
		return func(c *Config) {
			p := c.Providers[name]
			f(&p)
			c.Providers[name] = p
		}
	}
	setRoute := func(f func(r *RouteConfig)) func(c *Config) {
		return func(c *Config) {
			r := c.Routes["fast"]
			f(&r)
			c.Routes["fast"] = r
		}
	}
	setMCP := func(name string, f func(s *MCPServerConfig)) func(c *Config) {
		return func(c *Config) {
			s := c.Tools.MCPServers[name]
			f(&s)
			c.Tools.MCPServers[name] = s
		}
	}
	tg := func(f func(c *Config)) func(c *Config) { return f }
	tests := []struct {
		name   string
		mutate func(c *Config)
		want   string // one line of the error
	}{
		// usage and budget
		{"price without provider", func(c *Config) { c.Prices = map[string]PriceConfig{"gpt-4.1": {Input: 2}} },
			"prices.gpt-4.1: must be a route model, provider/model"},
		{"negative price", func(c *Config) { c.Prices = map[string]PriceConfig{"openai/gpt-4.1": {Output: -1}} },
			"prices.openai/gpt-4.1.output: must not be negative"},
		{"negative daily budget", func(c *Config) { c.Budget.Daily = -2 }, "budget.daily: must not be negative"},
		{"warn_at above 1", func(c *Config) { c.Budget.WarnAt = 80 }, "budget.warn_at: must be between 0 and 1"},
		{"unknown time zone", func(c *Config) { c.Budget.Timezone = "Mars/Olympus" }, "budget.timezone: must be an IANA time zone"},
		{"unknown origin", func(c *Config) { c.Budget.Origins = map[string]LimitsConfig{"hearbeat": {Daily: 1}} },
			"budget.origins.hearbeat: must be one of turn, api, heartbeat"},
		{"chat without channel", func(c *Config) { c.Budget.Chats = map[string]LimitsConfig{"123": {Daily: 1}} },
			"budget.chats.123: must name a chat as channel:chat_id"},
		{"reroute to nowhere", func(c *Config) { c.Budget.Reroute = "nowhere/model" }, "budget.reroute: "},
		{"usage dir in the workspace", func(c *Config) { c.Usage.Dir = filepath.Join(c.Agents.Workspace, "usage") },
			"usage.dir: must be outside agents.workspace"},
		// api
		{"api key name with a colon", func(c *Config) { c.API.Keys = map[string]string{"a:b": "0123456789abcdef"} },
			"api.keys.a:b: name must be 1-32 characters"},
		{"empty api key", func(c *Config) { c.API.Keys = map[string]string{"webui": ""} },
			"api.keys.webui: is empty (is its environment variable set?"},
		{"short api key", func(c *Config) { c.API.Keys = map[string]string{"webui": "short"} },
			"api.keys.webui: must be at least 16 characters"},
		{"shared api key", func(c *Config) {
			c.API.Keys = map[string]string{"a": "0123456789abcdef", "b": "0123456789abcdef"}
		}, "api.keys.b: is the same token as api.keys.a"},
		{"api concurrency", func(c *Config) { c.API.MaxConcurrent = 0 }, "api.max_concurrent: must be at least 1"},
		{"api turn timeout", func(c *Config) { c.API.TurnTimeout = 0 }, "api.turn_timeout: must be a positive duration"},
		// agents
		{"empty workspace", func(c *Config) { c.Agents.Workspace = "" }, "agents.workspace: must not be empty"},
		{"empty sessions dir", func(c *Config) { c.Agents.SessionsDir = "" }, "agents.sessions_dir: must not be empty"},
		{"sessions dir in the workspace", func(c *Config) { c.Agents.SessionsDir = filepath.Join(c.Agents.Workspace, "sessions") },
			"agents.sessions_dir: must be outside agents.workspace"},
		{"sessions dir is the workspace", func(c *Config) { c.Agents.SessionsDir = c.Agents.Workspace + "/" },
			"agents.sessions_dir: must be outside agents.workspace"},
		{"sessions dir holds the workspace", func(c *Config) { c.Agents.SessionsDir = filepath.Dir(c.Agents.Workspace) },
			"agents.sessions_dir: must not contain agents.workspace"},
		{"empty model", func(c *Config) { c.Agents.Model = "" }, "agents.model: must not be empty (write provider/model"},
		{"model without provider", func(c *Config) { c.Agents.Model = "gpt-4o" },
			`agents.model: "gpt-4o" is neither provider/model nor a name under routes (write e.g. openai/gpt-4o, or one of the routes: fast)`},
		{"model with unknown provider", func(c *Config) { c.Agents.Model = "gemini/pro" },
			`agents.model: provider "gemini" is not configured (add providers.gemini with kind and base_url, or use one of: anthropic, ollama, openai)`},
		{"model with empty id", func(c *Config) { c.Agents.Model = "openai/" }, `agents.model: "openai/" is not provider/model`},
		{"fallback with unknown provider", func(c *Config) { c.Agents.Fallbacks = []string{"openai/x", "nope/x"} },
			`agents.fallbacks[1]: provider "nope" is not configured`},
		{"max_tool_iterations", func(c *Config) { c.Agents.MaxToolIterations = 0 }, "agents.max_tool_iterations: must be at least 1, got 0"},
		{"memory_window", func(c *Config) { c.Agents.MemoryWindow = 9 }, "agents.memory_window: must be at least 10, got 9"},
		{"max_concurrent_turns", func(c *Config) { c.Agents.MaxConcurrentTurns = 0 }, "agents.max_concurrent_turns: must be at least 1"},
		{"negative max_tokens", func(c *Config) { c.Agents.MaxTokens = -1 }, "agents.max_tokens: must be at least 0"},
		{"small context_window", func(c *Config) { c.Agents.ContextWindow = 100 }, "agents.context_window: must be at least 1024"},
		{"max_tokens over context", func(c *Config) { c.Agents.MaxTokens = 200000 }, "agents.max_tokens: must be less than agents.context_window (128000)"},
		{"temperature", func(c *Config) { t := 2.5; c.Agents.Temperature = &t }, "agents.temperature: must be between 0 and 2, got 2.5"},
		{"tool_timeout", func(c *Config) { c.Agents.ToolTimeout = 0 }, "agents.tool_timeout: must be a positive duration, got 0s"},
		{"max_tool_output", func(c *Config) { c.Agents.MaxToolOutput = 10 }, "agents.max_tool_output: must be at least 100"},
		{"bootstrap_max_chars", func(c *Config) { c.Agents.BootstrapMaxChars = 0 }, "agents.bootstrap_max_chars: must be at least 100"},
		{"max_input_chars", func(c *Config) { c.Agents.MaxInputChars = 0 }, "agents.max_input_chars: must be at least 100"},
		{"session_cache", func(c *Config) { c.Agents.SessionCache = 0 }, "agents.session_cache: must be at least 1"},
		{"max_queue", func(c *Config) { c.Agents.MaxQueue = 0 }, "agents.max_queue: must be at least 1"},
		{"max_group_turns negative", func(c *Config) { c.Agents.MaxGroupTurns = -1 }, "agents.max_group_turns: must be at least 0"},
		{"max_group_turns over the cap", func(c *Config) { c.Agents.MaxGroupTurns = 5 },
			"agents.max_group_turns: must not exceed agents.max_concurrent_turns (4), got 5"},
		{"max_turns_per_group", func(c *Config) { c.Agents.MaxTurnsPerGroup = -1 }, "agents.max_turns_per_group: must be at least 0"},
		// providers
		{"extra provider without kind", setProvider("ollama", func(p *ProviderConfig) { p.Kind = "" }),
			"providers.ollama.kind: must be set for a provider not named openai, anthropic or gemini"},
		{"unknown kind", setProvider("ollama", func(p *ProviderConfig) { p.Kind = "vertex" }),
			`providers.ollama.kind: must be one of openai, openai-responses, anthropic, gemini, got "vertex"`},
		{"store outside the Responses API", setProvider("ollama", func(p *ProviderConfig) { p.Store = true }),
			`providers.ollama.store: applies only to kind openai-responses (the Responses API), not "openai"`},
		{"base_url scheme", setProvider("ollama", func(p *ProviderConfig) { p.BaseURL = "ftp://host" }),
			`providers.ollama.base_url: must be a http or https URL with a host, got "ftp://host"`},
		{"base_url without host", setProvider("ollama", func(p *ProviderConfig) { p.BaseURL = "localhost:11434" }),
			"providers.ollama.base_url: must be a http or https URL with a host"},
		{"base_url unparsable", setProvider("ollama", func(p *ProviderConfig) { p.BaseURL = "http://[::1" }),
			"providers.ollama.base_url: not a valid URL"},
		{"base_url empty", setProvider("ollama", func(p *ProviderConfig) { p.BaseURL = "" }),
			"providers.ollama.base_url: must not be empty"},
		{"header name", setProvider("ollama", func(p *ProviderConfig) { p.ExtraHeaders = map[string]string{"Bad Header": "x"} }),
			"providers.ollama.extra_headers.Bad Header: is not a valid HTTP header name"},
		{"provider timeout", setProvider("ollama", func(p *ProviderConfig) { p.Timeout = 0 }), "providers.ollama.timeout: must be a positive duration"},
		{"max_retries", setProvider("ollama", func(p *ProviderConfig) { p.MaxRetries = -1 }), "providers.ollama.max_retries: must be at least 0"},
		{"provider name", func(c *Config) { c.Providers["my.llm"] = c.Providers["ollama"] },
			"providers.my.llm: provider names may use only letters, digits, _ and -"},
		{"gemini base_url scheme", func(c *Config) {
			c.Providers["gemini"] = ProviderConfig{APIKey: "k", BaseURL: "ftp://x", Timeout: time.Minute}
		}, `providers.gemini.base_url: must be a http or https URL with a host, got "ftp://x"`},
		// routes
		{"route without model", setRoute(func(r *RouteConfig) { r.Model = "" }), "routes.fast.model: must not be empty"},
		{"route naming a route", func(c *Config) { c.Routes["slow"] = RouteConfig{Model: "fast"} },
			`routes.slow.model: "fast" is not provider/model (write e.g. openai/gpt-4o-mini) (a route's model is provider/model, not another route)`},
		{"route with unknown provider", setRoute(func(r *RouteConfig) { r.Model = "nope/x" }), `routes.fast.model: provider "nope" is not configured`},
		{"route fallback", setRoute(func(r *RouteConfig) { r.Fallbacks = []string{"nope/x"} }), `routes.fast.fallbacks[0]: provider "nope" is not configured`},
		{"route name", func(c *Config) { c.Routes["a/b"] = RouteConfig{Model: "openai/x"} }, "routes.a/b: route names may use only"},
		{"route context_window", setRoute(func(r *RouteConfig) { r.ContextWindow = -1 }), "routes.fast.context_window: must be at least 0"},
		{"route max_tokens", setRoute(func(r *RouteConfig) { r.MaxTokens = -1 }), "routes.fast.max_tokens: must be at least 0"},
		{"model is a broken route", func(c *Config) { c.Agents.Model = "fast"; c.Routes["fast"] = RouteConfig{Model: "nope/x"} },
			`agents.model: route fast: provider "nope" is not configured`},
		// channels
		{"telegram token", tg(func(c *Config) { set(c, "channels.telegram.token", "") }), "channels.telegram.token: must be set when the channel is enabled"},
		{"telegram token malformed", tg(func(c *Config) { set(c, "channels.telegram.token", "bad") }), "channels.telegram.token: is not a Telegram bot token"},
		{"telegram token without id", tg(func(c *Config) { set(c, "channels.telegram.token", ":AAFabc") }), "channels.telegram.token: is not a Telegram bot token"},
		{"telegram token with a space", tg(func(c *Config) { set(c, "channels.telegram.token", "123: AAF") }), "channels.telegram.token: is not a Telegram bot token"},
		{"telegram empty allowlist", tg(func(c *Config) { set(c, "channels.telegram.allow_from", nil) }),
			`channels.telegram.allow_from: must not be empty when policy is allowlist (add your user id — the bot answers /whoami with it — or use "*" or policy: pairing)`},
		{"telegram policy", tg(func(c *Config) { set(c, "channels.telegram.policy", "closed") }),
			`channels.telegram.policy: must be one of allowlist, open, pairing, got "closed"`},
		{"disabled channel policy is still checked", func(c *Config) {
			set(c, "channels.telegram.enabled", false)
			set(c, "channels.telegram.policy", "allowed")
		}, `channels.telegram.policy: must be one of allowlist, open, pairing, got "allowed"`},
		{"telegram group_policy", tg(func(c *Config) { set(c, "channels.telegram.group_policy", "all") }),
			`channels.telegram.group_policy: must be one of mention, open, got "all"`},
		{"blank allow_from entry", tg(func(c *Config) { set(c, "channels.telegram.allow_from", []string{"1", " "}) }),
			"channels.telegram.allow_from[1]: must not be empty"},
		{"telegram api_url", tg(func(c *Config) { set(c, "channels.telegram.api_url", "") }), "channels.telegram.api_url: must not be empty"},
		{"telegram edit_interval", tg(func(c *Config) { set(c, "channels.telegram.edit_interval", 0) }), "channels.telegram.edit_interval: must be a positive duration"},
		{"telegram typing_delay", tg(func(c *Config) { set(c, "channels.telegram.typing_delay", -time.Second) }), "channels.telegram.typing_delay: must not be negative"},
		{"telegram mode", tg(func(c *Config) { set(c, "channels.telegram.mode", "push") }), `channels.telegram.mode: must be one of polling, webhook, got "push"`},
		{"webhook without url", tg(func(c *Config) {
			set(c, "channels.telegram.mode", "webhook")
			set(c, "channels.telegram.webhook_secret", "s")
		}),
			"channels.telegram.webhook_url: must be set when mode is webhook"},
		{"webhook over http", tg(func(c *Config) {
			set(c, "channels.telegram.mode", "webhook")
			set(c, "channels.telegram.webhook_secret", "s")
			set(c, "channels.telegram.webhook_url", "http://bot.example.com/tg")
		}),
			"channels.telegram.webhook_url: must be an https URL with a host"},
		{"webhook port", tg(func(c *Config) {
			set(c, "channels.telegram.mode", "webhook")
			set(c, "channels.telegram.webhook_secret", "s")
			set(c, "channels.telegram.webhook_url", "https://bot.example.com:8080/tg")
		}),
			"channels.telegram.webhook_url: port must be 443, 80, 88 or 8443"},
		{"webhook without secret", tg(func(c *Config) {
			set(c, "channels.telegram.mode", "webhook")
			set(c, "channels.telegram.webhook_url", "https://bot.example.com/tg")
		}),
			"channels.telegram.webhook_secret: must be set when mode is webhook"},
		{"webhook secret characters", tg(func(c *Config) {
			set(c, "channels.telegram.mode", "webhook")
			set(c, "channels.telegram.webhook_url", "https://bot.example.com/tg")
			set(c, "channels.telegram.webhook_secret", "has space")
		}), "channels.telegram.webhook_secret: may use only A-Z a-z 0-9 _ -"},
		{"proxy scheme", tg(func(c *Config) { set(c, "channels.telegram.proxy", "ftp://proxy:21") }),
			"channels.telegram.proxy: must be a http or https or socks5 or socks5h URL with a host"},
		{"proxy password not echoed", tg(func(c *Config) { set(c, "channels.telegram.proxy", "ftp://u:hunter22@proxy:21") }),
			`channels.telegram.proxy: must be a http or https or socks5 or socks5h URL with a host, got "ftp://u:***@proxy:21"`},
		{"poll_timeout", tg(func(c *Config) { set(c, "channels.telegram.poll_timeout", 500*time.Millisecond) }), "channels.telegram.poll_timeout: must be at least 1s"},
		{"telegram max_media_bytes", tg(func(c *Config) { set(c, "channels.telegram.max_media_bytes", 0) }), "channels.telegram.max_media_bytes: must be at least 1"},
		{"telegram rate_per_minute", tg(func(c *Config) { set(c, "channels.telegram.rate_per_minute", 0) }), "channels.telegram.rate_per_minute: must be at least 1"},
		{"telegram stall_grace", tg(func(c *Config) { set(c, "channels.telegram.stall_grace", 0) }), "channels.telegram.stall_grace: must be a positive duration"},
		{"discord rate_per_minute", func(c *Config) { set(c, "channels.discord.rate_per_minute", 0) }, "channels.discord.rate_per_minute: must be at least 1"},
		{"discord token", func(c *Config) { set(c, "channels.discord.token", "") }, "channels.discord.token: must be set when the channel is enabled"},
		{"discord token malformed", func(c *Config) { set(c, "channels.discord.token", "bad") }, "channels.discord.token: is not a Discord bot token"},
		{"discord token with a space", func(c *Config) { set(c, "channels.discord.token", "MTIz.GaBc.de f") }, "channels.discord.token: is not a Discord bot token"},
		{"discord empty allowlist", func(c *Config) { set(c, "channels.discord.allow_from", []string{}) },
			"channels.discord.allow_from: must not be empty when policy is allowlist"},
		{"discord group_policy", func(c *Config) { set(c, "channels.discord.group_policy", "") }, "channels.discord.group_policy: must be one of mention, open"},
		{"discord guild id", func(c *Config) { set(c, "channels.discord.allow_guilds", []string{""}) }, "channels.discord.allow_guilds[0]: must not be empty"},
		{"discord api_url", func(c *Config) { set(c, "channels.discord.api_url", "discord.com") }, "channels.discord.api_url: must be a http or https URL"},
		{"discord max_media_bytes", func(c *Config) { set(c, "channels.discord.max_media_bytes", -1) }, "channels.discord.max_media_bytes: must be at least 1"},
		{"discord catch_up negative", func(c *Config) { set(c, "channels.discord.catch_up", -time.Hour) }, "channels.discord.catch_up: must not be negative"},
		{"transcription url", func(c *Config) { c.Channels.Transcription.BaseURL = "api.openai.com" }, "channels.transcription.base_url: must be a http or https URL"},
		{"transcription model", func(c *Config) {
			c.Channels.Transcription.BaseURL = "https://api.openai.com/v1"
			c.Channels.Transcription.Model = ""
		}, "channels.transcription.model: must be set when base_url is set"},
		// tools
		{"exec timeout", func(c *Config) { c.Tools.Exec.Timeout = -time.Second }, "tools.exec.timeout: must be a positive duration, got -1s"},
		{"exec max_output", func(c *Config) { c.Tools.Exec.MaxOutput = 0 }, "tools.exec.max_output: must be at least 100"},
		{"deny pattern", func(c *Config) { c.Tools.Exec.DenyPatterns = []string{`rm\s`, "(unclosed"} },
			"tools.exec.deny_patterns[1]: is not a valid regular expression"},
		{"search provider", func(c *Config) { c.Tools.Web.SearchProvider = "google" },
			`tools.web.search_provider: must be one of duckduckgo, brave, got "google"`},
		{"brave without key", func(c *Config) { c.Tools.Web.SearchProvider = "brave" }, "tools.web.brave_api_key: must be set when search_provider is brave"},
		{"max_results low", func(c *Config) { c.Tools.Web.MaxResults = 0 }, "tools.web.max_results: must be between 1 and 20, got 0"},
		{"max_results high", func(c *Config) { c.Tools.Web.MaxResults = 21 }, "tools.web.max_results: must be between 1 and 20, got 21"},
		{"fetch_max_bytes", func(c *Config) { c.Tools.Web.FetchMaxBytes = 10 }, "tools.web.fetch_max_bytes: must be at least 1024"},
		{"mcp with both", setMCP("local", func(s *MCPServerConfig) { s.URL = "https://x" }), "tools.mcp_servers.local: has both command and url"},
		{"mcp with neither", setMCP("local", func(s *MCPServerConfig) { s.Command = "" }), "tools.mcp_servers.local: needs command (a stdio server) or url"},
		{"mcp url", setMCP("remote", func(s *MCPServerConfig) { s.URL = "mcp.example.com" }), "tools.mcp_servers.remote.url: must be a http or https URL"},
		{"mcp url with args", setMCP("remote", func(s *MCPServerConfig) { s.Args = []string{"-v"} }),
			"tools.mcp_servers.remote: args, env and cwd apply only to a command server"},
		{"mcp command with headers", setMCP("local", func(s *MCPServerConfig) { s.Headers = map[string]string{"X-A": "b"} }),
			"tools.mcp_servers.local.headers: apply only to an url server"},
		{"mcp header name", setMCP("remote", func(s *MCPServerConfig) { s.Headers = map[string]string{"X:A": "b"} }),
			"tools.mcp_servers.remote.headers.X:A: is not a valid HTTP header name"},
		{"mcp tool_timeout", setMCP("local", func(s *MCPServerConfig) { s.ToolTimeout = 0 }), "tools.mcp_servers.local.tool_timeout: must be a positive duration"},
		{"mcp name", func(c *Config) {
			c.Tools.MCPServers["my server"] = MCPServerConfig{Command: "x", ToolTimeout: time.Second}
		},
			"tools.mcp_servers.my server: server names may use only letters, digits, _ and -"},
		// gateway and log
		{"listen without port", func(c *Config) { c.Gateway.Listen = "localhost" }, `gateway.listen: must be host:port (e.g. 127.0.0.1:18790, or :18790 for all interfaces), got "localhost"`},
		{"listen port range", func(c *Config) { c.Gateway.Listen = "127.0.0.1:99999" }, `gateway.listen: port must be a number from 0 to 65535, got "99999"`},
		{"listen port name", func(c *Config) { c.Gateway.Listen = "127.0.0.1:http" }, `gateway.listen: port must be a number from 0 to 65535, got "http"`},
		{"heartbeat interval", func(c *Config) { c.Gateway.Heartbeat.Interval = 0 }, "gateway.heartbeat.interval: must be a positive duration"},
		{"shutdown_grace", func(c *Config) { c.Gateway.ShutdownGrace = 0 }, "gateway.shutdown_grace: must be a positive duration"},
		{"idle_timeout", func(c *Config) { c.Gateway.IdleTimeout = 0 }, "gateway.idle_timeout: must be a positive duration"},
		{"read_timeout", func(c *Config) { c.Gateway.ReadTimeout = -time.Second }, "gateway.read_timeout: must be a positive duration"},
		{"max_connections", func(c *Config) { c.Gateway.MaxConnections = 0 }, "gateway.max_connections: must be at least 1, got 0"},
		{"allowed_hosts with port", func(c *Config) { c.Gateway.AllowedHosts = []string{"nanobot:18790"} }, `gateway.allowed_hosts: "nanobot:18790" is not a host name`},
		{"trusted_proxies", func(c *Config) { c.Channels.Web.TrustedProxies = []string{"10.0.0.0/8", "proxy.local"} },
			`channels.web.trusted_proxies: "proxy.local" is neither an IP address nor a CIDR range`},
		{"bus backend", func(c *Config) { c.Bus.Backend = "kafka" }, `bus.backend: must be one of memory, nats, got "kafka"`},
		{"nats url scheme", func(c *Config) { c.Bus.Backend = BusNATS; c.Bus.NATS.URL = "http://nats:4222" }, `bus.nats.url: must be a nats or tls or ws or wss URL with a host`},
		{"nats url empty", func(c *Config) { c.Bus.Backend = BusNATS; c.Bus.NATS.URL = "" }, "bus.nats.url: must not be empty"},
		{"nats prefix", func(c *Config) { c.Bus.Backend = BusNATS; c.Bus.NATS.Prefix = "a.b" }, `bus.nats.prefix: must be letters, digits, - or _`},
		{"nats partitions", func(c *Config) { c.Bus.Backend = BusNATS; c.Bus.NATS.Partitions = 0 }, "bus.nats.partitions: must be at least 1, got 0"},
		{"nats ack_wait", func(c *Config) { c.Bus.Backend = BusNATS; c.Bus.NATS.AckWait = 10 * time.Millisecond }, "bus.nats.ack_wait: must be at least 1s"},
		{"nats lease_ttl", func(c *Config) { c.Bus.Backend = BusNATS; c.Bus.NATS.LeaseTTL = 500 * time.Millisecond }, "bus.nats.lease_ttl: must be at least 1s"},
		{"nats sessions", func(c *Config) { c.Bus.Backend = BusNATS; c.Bus.NATS.Sessions = "kv" }, `bus.nats.sessions: must be one of shared-volume, jetstream, got "kv"`},
		{"nats tls pair", func(c *Config) { c.Bus.Backend = BusNATS; c.Bus.NATS.TLS.CertFile = "/c.pem" }, "bus.nats.tls: cert_file and key_file go together"},
		{"log level", func(c *Config) { c.Log.Level = "verbose" }, `log.level: must be one of debug, info, warn, error, got "verbose"`},
		{"log format", func(c *Config) { c.Log.Format = "xml" }, `log.format: must be one of auto, console, json, got "xml"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := baseConfig(t)
			tt.mutate(c)
			err := c.Validate()
			if err == nil {
				t.Fatalf("Validate passed, want %q", tt.want)
			}
			if !hasLine(err.Error(), tt.want) {
				t.Errorf("Validate:\n%v\nwant a line starting %q", err, tt.want)
			}
		})
	}
}

// hasLine reports whether one line of msg starts with want.
func hasLine(msg, want string) bool {
	for line := range strings.SplitSeq(msg, "\n") {
		if strings.HasPrefix(line, want) {
			return true
		}
	}
	return false
}

func TestValidateReportsEveryProblem(t *testing.T) {
	c := baseConfig(t)
	c.Agents.Model = ""
	set(c, "channels.telegram.allow_from", nil)
	c.Log.Level = "loud"
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate passed")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 3 {
		t.Fatalf("Validate reported %d problems, want 3:\n%v", len(lines), err)
	}
	for i, prefix := range []string{"agents.model:", "channels.telegram.allow_from:", "log.level:"} {
		if !strings.HasPrefix(lines[i], prefix) {
			t.Errorf("problem %d = %q, want it to start %q", i, lines[i], prefix)
		}
	}
}

func TestAPIKeysComeFromTheEnvironment(t *testing.T) {
	isolateEnv(t, "NB_TEST_API_KEY")
	t.Setenv("NB_TEST_API_KEY", "sk-from-env-0123456789")
	cfg := mustLoad(t, validBase+"api:\n  keys: {webui: \"${NB_TEST_API_KEY}\", unset: \"${NB_TEST_API_KEY_MISSING:-}\"}\n")
	if got := cfg.API.Keys["webui"]; got != "sk-from-env-0123456789" {
		t.Errorf("api.keys.webui = %q", got)
	}
	if cfg.API.RatePerMinute != 60 || cfg.API.MaxConcurrent != 4 || cfg.API.TurnTimeout != 10*time.Minute || !cfg.API.ToolHints {
		t.Errorf("api defaults = %+v", cfg.API)
	}
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "api.keys.unset: is empty") || strings.Contains(err.Error(), "sk-from-env") {
		t.Errorf("Validate = %v; want the unset one named, the token never shown", err)
	}
}

func TestValidateWeb(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"short token", "channels:\n  web: {token: short}\n", "channels.web.token: must be at least 16"},
		{"zero ttl", "channels:\n  web: {session_ttl: 0s}\n", "channels.web.session_ttl: must be a positive duration"},
		{"no upload", "channels:\n  web: {max_upload_bytes: 0}\n", "channels.web.max_upload_bytes: must be at least 1"},
		{"bad public url", "channels:\n  web: {public_url: \"ftp://x\"}\n", "channels.web.public_url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustLoad(t, tt.yaml)
			err := cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestWebServed(t *testing.T) {
	tests := []struct {
		listen      string
		enabled     bool
		allowRemote bool
		want        bool
	}{
		{"127.0.0.1:18790", true, false, true},
		{"[::1]:18790", true, false, true},
		{"localhost:18790", true, false, true},
		{"0.0.0.0:18790", true, false, false},
		{":18790", true, false, false},
		{"0.0.0.0:18790", true, true, true},
		{"127.0.0.1:18790", false, false, false},
	}
	for _, tt := range tests {
		w := WebChannelConfig{Enabled: tt.enabled, AllowRemote: tt.allowRemote}
		got, why := w.WebServed(tt.listen)
		if got != tt.want {
			t.Errorf("WebServed(%s, enabled=%v, allow_remote=%v) = %v (%s), want %v", tt.listen, tt.enabled, tt.allowRemote, got, why, tt.want)
		}
		if !got && tt.enabled && !strings.Contains(why, "channels.web.allow_remote") {
			t.Errorf("reason %q does not name channels.web.allow_remote", why)
		}
	}
}

func TestLengthBoundsOfNames(t *testing.T) {
	tests := []struct {
		name  string
		valid func(string) bool
		in    string
		want  bool
	}{
		{"key name of 32", validAPIKeyName, "a" + strings.Repeat("_", 31), true},
		{"key name of 33", validAPIKeyName, strings.Repeat("a", 33), false},
		{"empty key name", validAPIKeyName, "", false},
		{"key name starting with -", validAPIKeyName, "-a", false},
		{"key name in capitals", validAPIKeyName, "Ab", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.valid(tt.in); got != tt.want {
				t.Errorf("%q: got %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}
