package config

import (
	"errors"
	"fmt"
)

// Defaults returns the configuration an empty file yields with no
// environment: every key at its default, the built-in openai and anthropic
// providers present, paths not yet resolved against a config directory.
//
// It is how code that builds a component without loading a file (tests, the
// bench) gets the values config carries, so that no constructor needs a
// fallback of its own for them (see the package doc).
//
// With sections (internal/channels/kinds.Sections), Channels.Kinds holds
// each channel's section at its defaults; without, a channel's Kind adds
// its own when first asked (Section).
func Defaults(sections ...ChannelSection) Config {
	cfg, errs := build(map[string]any{}, lineIndex{}, func(string) (string, bool) { return "", false }, false, sections)
	if len(errs) > 0 {
		// defaults is a constant of this package; TestDefaultsValidate
		// keeps it decodable.
		panic(fmt.Sprintf("config: the defaults do not decode: %v", errors.Join(errs...)))
	}
	return *cfg
}

// defaults lists every key with its default value, as viper keys — but a
// chat channel's, which its section carries (ChannelSection.Defaults). It
// is the single source of defaults: Load registers them (which also lets NANOBOT_*
// environment variables override keys the file does not mention), together
// with providerDefaults and mcpServerDefaults for every configured entry, and
// Defaults decodes them alone.
var defaults = map[string]any{
	"agents.workspace":            "~/.nanobot/workspace",
	"agents.sessions_dir":         "sessions",
	"agents.model":                "openai/gpt-4o-mini",
	"agents.fallbacks":            []string{},
	"agents.max_tool_iterations":  40,
	"agents.memory_window":        100,
	"agents.max_concurrent_turns": 4,
	"agents.max_tokens":           8192,
	"agents.context_window":       128000,
	"agents.tool_timeout":         "120s",
	"agents.max_tool_output":      16000,
	"agents.bootstrap_max_chars":  20000,
	"agents.max_input_chars":      32000,
	"agents.session_cache":        256,
	"agents.session_cache_bytes":  64 << 20,
	"agents.max_queue":            20,
	"agents.max_group_turns":      0,
	"agents.max_turns_per_group":  0,

	"budget.daily":            0.0,
	"budget.monthly":          0.0,
	"budget.warn_at":          0.8,
	"budget.timezone":         "",
	"budget.per_chat.daily":   0.0,
	"budget.per_chat.monthly": 0.0,
	"budget.reroute":          "",
	"budget.owner":            "",
	"usage.dir":               "usage",
	"usage.retention":         "2160h",
	"usage.sync_every":        "1s",

	"history.budget":     0,
	"history.high_water": 1.0,
	"history.low_water":  0.7,

	"providers.openai.kind":        "openai",
	"providers.openai.api_key":     "",
	"providers.openai.base_url":    "https://api.openai.com/v1",
	"providers.anthropic.kind":     "anthropic",
	"providers.anthropic.api_key":  "",
	"providers.anthropic.base_url": "https://api.anthropic.com",

	"channels.web.enabled":          true,
	"channels.web.allow_remote":     false,
	"channels.web.token":            "",
	"channels.web.session_ttl":      "168h",
	"channels.web.max_upload_bytes": 20 << 20,
	"channels.web.public_url":       "",
	"channels.web.trusted_proxies":  []string{},

	"channels.transcription.base_url": "",
	"channels.transcription.api_key":  "",
	"channels.transcription.model":    "whisper-1",

	"tools.restrict_to_workspace": true,
	"tools.exec.enabled":          true,
	"tools.exec.timeout":          "60s",
	"tools.exec.max_output":       10000,
	"tools.exec.deny_patterns":    []string{},
	"tools.exec.sandbox":          ExecSandboxAuto,
	"tools.exec.network":          true,
	"tools.exec.connect_ports":    []any{},
	"tools.exec.expose":           []any{},
	"tools.web.search_provider":   "duckduckgo",
	"tools.web.brave_api_key":     "",
	"tools.web.max_results":       5,
	"tools.web.fetch_max_bytes":   2 << 20,

	"api.rate_per_minute":      60,
	"api.burst":                10,
	"api.max_concurrent":       4,
	"api.max_body_bytes":       4 << 20,
	"api.max_history_messages": 1000,
	"api.max_history_bytes":    1 << 20,
	"api.max_images":           16,
	"api.turn_timeout":         "10m",
	"api.tool_hints":           true,

	"gateway.listen":             "127.0.0.1:18790",
	"gateway.heartbeat.enabled":  true,
	"gateway.heartbeat.interval": "30m",
	"gateway.shutdown_grace":     "20s",
	"gateway.allowed_hosts":      []string{},
	"gateway.max_connections":    1024,
	"gateway.idle_timeout":       "1m",
	"gateway.read_timeout":       "2m",

	"bus.backend":            "memory",
	"bus.nats.url":           "nats://127.0.0.1:4222",
	"bus.nats.creds_file":    "",
	"bus.nats.tls.ca_file":   "",
	"bus.nats.tls.cert_file": "",
	"bus.nats.tls.key_file":  "",
	"bus.nats.prefix":        "nanobot",
	"bus.nats.partitions":    32,
	"bus.nats.ack_wait":      "30s",
	"bus.nats.lease_ttl":     "15s",
	"bus.nats.sessions":      "shared-volume",

	"log.level":  "info",
	"log.format": "auto",
}

// providerDefaults apply to every entry under providers, including ones the
// user adds (ollama, openrouter, ...): Load registers them per configured name,
// so "providers.<name>.timeout" has a default and an environment override like
// any other key.
var providerDefaults = map[string]any{
	"timeout":     "300s",
	"max_retries": 3,
}

// mcpServerDefaults apply to every entry under tools.mcp_servers.
var mcpServerDefaults = map[string]any{
	"tool_timeout": "60s",
}
