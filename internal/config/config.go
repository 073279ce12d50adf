// Package config defines nanobot's configuration: the structs every component
// receives its own part of, their defaults, loading from YAML and the
// environment with viper, and validation that names the offending key.
//
// viper is used here and nowhere else; components receive plain structs.
//
// # One owner per default
//
// This package is the only source of the values a user can set. Every key's
// default is in defaults (defaults.go) — a chat channel's in its section's
// Defaults (ChannelSection, declared in the channel's folder and handed to
// Load by the channel table) — config.example.yaml shows it and
// docs/configuration.md lists it; TestDefaultsAgreeWithExampleAndDocs keeps
// the three equal, and Validate rejects values a component cannot run with.
// Constructors therefore default nothing that this package carries: they
// take the value they are given, and a zero there is either a programming
// error (a caller that skipped Load or Defaults) or a deliberate "off"
// documented on the field. Code that builds a component without a file
// (tests, the bench) starts from Defaults().
//
// A component keeps a fallback only for a value config does not carry (a
// test seam such as a shorter wait, or an internal bound no user tunes), and
// names it as a constant beside its consumer with a doc comment saying why it
// is not a key.
package config

import (
	"slices"
	"time"
)

// Config is the whole configuration file (docs/configuration.md).
type Config struct {
	Agents    AgentsConfig              `mapstructure:"agents"`
	History   HistoryConfig             `mapstructure:"history"`
	Providers map[string]ProviderConfig `mapstructure:"providers"`
	Routes    map[string]RouteConfig    `mapstructure:"routes"`
	Channels  ChannelsConfig            `mapstructure:"channels"`
	Tools     ToolsConfig               `mapstructure:"tools"`
	Gateway   GatewayConfig             `mapstructure:"gateway"`
	API       APIConfig                 `mapstructure:"api"`
	Bus       BusConfig                 `mapstructure:"bus"`
	Log       LogConfig                 `mapstructure:"log"`
	// Prices override the built-in price table (docs/usage.md#prices),
	// keyed by route model ("openai/gpt-4.1").
	Prices map[string]PriceConfig `mapstructure:"prices"`
	Budget BudgetConfig           `mapstructure:"budget"`
	Usage  UsageConfig            `mapstructure:"usage"`

	// SecretVars maps the key of each secret written as one ${NAME}
	// reference to that variable ("providers.openai.api_key" →
	// OPENAI_API_KEY), so an error can name what to fix. A secret whose
	// variable is unset loads as empty instead of failing (Set false): what
	// needs it starts degraded and says which variable is missing
	// (ProviderProblem, ChannelProblem), so the page, status and doctor still
	// run. Filled by Load; not a key.
	SecretVars map[string]SecretVar `mapstructure:"-"`
}

// SecretVar is the environment variable a secret was read from.
type SecretVar struct {
	Name string
	// Set is false when the variable was not set: the secret is empty.
	Set bool
}

// PriceConfig is what a model costs, in USD per million tokens.
type PriceConfig struct {
	Input      float64 `mapstructure:"input"`
	Output     float64 `mapstructure:"output"`
	CacheRead  float64 `mapstructure:"cache_read"`
	CacheWrite float64 `mapstructure:"cache_write"`
	// PerMinute prices audio by its length (a transcription model billed
	// by the minute, e.g. whisper-1).
	PerMinute float64 `mapstructure:"per_minute"`
}

// BudgetConfig limits what the daemon spends on model calls, in USD
// (docs/usage.md#budgets). A limit of 0 is no limit.
type BudgetConfig struct {
	// Daily and Monthly hold for the whole daemon.
	Daily   float64 `mapstructure:"daily"`
	Monthly float64 `mapstructure:"monthly"`
	// WarnAt is the share of a limit at which the owner is told, once.
	WarnAt float64 `mapstructure:"warn_at"`
	// Timezone is the IANA zone whose midnight starts a day and a month
	// (also the ledger's days); empty is the machine's local zone.
	Timezone string `mapstructure:"timezone"`
	// PerChat holds for each chat on its own; Chats overrides it for the
	// chats named ("telegram:123").
	PerChat LimitsConfig            `mapstructure:"per_chat"`
	Chats   map[string]LimitsConfig `mapstructure:"chats"`
	// Origins hold for all calls of one origin: heartbeat, cron, turn,
	// api, consolidation, subagent, transcription.
	Origins map[string]LimitsConfig `mapstructure:"origins"`
	// Reroute is the cheaper route new calls move to at a limit, instead
	// of stopping.
	Reroute string `mapstructure:"reroute"`
	// Owner is the chat ("telegram:123") warned at warn_at; empty is the
	// first entry of the first enabled channel's allow_from.
	Owner string `mapstructure:"owner"`
}

// LimitsConfig is a daily and a monthly limit in USD.
type LimitsConfig struct {
	Daily   float64 `mapstructure:"daily"`
	Monthly float64 `mapstructure:"monthly"`
}

// UsageConfig configures the usage ledger (docs/usage.md#the-ledger).
type UsageConfig struct {
	// Dir holds the ledger, outside the workspace; a relative path is
	// relative to the config file's directory.
	Dir string `mapstructure:"dir"`
	// Retention is how long each call's record is kept; older days keep
	// only their daily totals.
	Retention time.Duration `mapstructure:"retention"`
	// SyncEvery is how often the ledger is synced to disk; 0 syncs each
	// record (an fsync per model call).
	SyncEvery time.Duration `mapstructure:"sync_every"`
}

// AgentsConfig configures the agent loop.
type AgentsConfig struct {
	// Workspace is the directory holding AGENTS.md, memory/, skills/: the
	// one the file and shell tools work in.
	Workspace string `mapstructure:"workspace"`
	// SessionsDir holds the chats' JSONL session files, outside the
	// workspace so that no tool can reach them (docs/sessions.md,
	// docs/tools.md#sandbox). A relative path is relative to the config file's
	// directory, the data dir that also holds web-token and pairing.json
	// [sessions: ~/.nanobot/sessions].
	SessionsDir string `mapstructure:"sessions_dir"`
	// Model is "provider/model" or the name of an entry under routes.
	Model string `mapstructure:"model"`
	// Fallbacks are tried in order when Model fails with a retryable error.
	Fallbacks         []string `mapstructure:"fallbacks"`
	MaxToolIterations int      `mapstructure:"max_tool_iterations"`
	// MemoryWindow is how many unconsolidated messages trigger consolidation.
	MemoryWindow int `mapstructure:"memory_window"`
	// MaxConcurrentTurns caps model calls in flight across all sessions.
	MaxConcurrentTurns int `mapstructure:"max_concurrent_turns"`
	// MaxTokens caps each reply; 0 uses the provider's default.
	MaxTokens int `mapstructure:"max_tokens"`
	// ContextWindow is the model's context size in tokens, used to budget
	// history; a route may set its own.
	ContextWindow int `mapstructure:"context_window"`
	// Temperature is used when set; models that reject it never get it.
	Temperature *float64 `mapstructure:"temperature"`
	// ToolTimeout bounds one tool call (exec has its own timeout).
	ToolTimeout time.Duration `mapstructure:"tool_timeout"`
	// MaxToolOutput caps tool output (characters) before it enters history.
	MaxToolOutput int `mapstructure:"max_tool_output"`
	// BootstrapMaxChars caps each bootstrap file in the system prompt.
	BootstrapMaxChars int `mapstructure:"bootstrap_max_chars"`
	// MaxInputChars caps one inbound message; longer input is cut with a note.
	MaxInputChars int `mapstructure:"max_input_chars"`
	// SessionCache is how many sessions stay loaded in memory.
	SessionCache int `mapstructure:"session_cache"`
	// SessionCacheBytes caps the loaded sessions by size (their files'
	// bytes, a measure of the memory they hold), besides their number.
	SessionCacheBytes int64 `mapstructure:"session_cache_bytes"`
	// MaxQueue is how many messages may wait for a busy chat; beyond it the
	// oldest are dropped and the sender is told.
	MaxQueue int `mapstructure:"max_queue"`
	// MaxGroupTurns caps the turns group chats (Telegram groups, Discord
	// servers) may run at once, all together, so that part of
	// max_concurrent_turns stays free for direct messages; 0 means
	// max_concurrent_turns - 1 (at least 1).
	MaxGroupTurns int `mapstructure:"max_group_turns"`
	// MaxTurnsPerGroup caps the turns one group (its topics or threads) may
	// run at once; 0 means half of the group share (at least 1).
	MaxTurnsPerGroup int `mapstructure:"max_turns_per_group"`
}

// HistoryConfig is how much of the model's context the conversation may
// use, and how detail is given up when it does not fit
// (docs/history.md#levels-of-detail).
type HistoryConfig struct {
	// Budget caps the tokens of one model call's system prompt and
	// history; 0 uses the route's context window less max_tokens and the
	// tool list (a smaller budget still applies when the window is smaller).
	Budget int `mapstructure:"budget"`
	// HighWater is the share of the budget at which a model call gives up
	// detail: tool results and long pasted texts of earlier turns are
	// shortened, oldest first. 0 < low_water < high_water ≤ 1.
	HighWater float64 `mapstructure:"high_water"`
	// LowWater is the share of the budget a call that crossed high_water is
	// brought down to, in one step, so the provider's prompt cache keeps
	// the prefix for many calls after it.
	LowWater float64 `mapstructure:"low_water"`
}

// ProviderConfig is one LLM endpoint under providers.<name>.
type ProviderConfig struct {
	// Kind is the wire API: "openai", "openai-responses", "anthropic" or
	// "gemini". It defaults to the provider's name for the names "openai",
	// "anthropic" and "gemini".
	Kind         string            `mapstructure:"kind"`
	APIKey       string            `mapstructure:"api_key" secret:"true"`
	BaseURL      string            `mapstructure:"base_url" secret:"url"`
	ExtraHeaders map[string]string `mapstructure:"extra_headers" secret:"names"`
	// Timeout bounds one whole model call (connect to last token).
	Timeout time.Duration `mapstructure:"timeout"`
	// MaxRetries is how many times a retryable failure is retried.
	MaxRetries int `mapstructure:"max_retries"`
	// Store (kind openai-responses only) lets OpenAI keep responses on its
	// side; off by default, so reasoning is replayed encrypted instead.
	Store bool `mapstructure:"store"`
}

// ProviderKinds are the wire APIs a provider entry may speak (kind).
var ProviderKinds = []string{"openai", "openai-responses", "anthropic", "gemini"}

// impliedKind is the kind of a provider entry that sets none: its own name
// when that names a kind (providers.gemini needs no kind: gemini).
func impliedKind(name string) string {
	if slices.Contains(ProviderKinds, name) {
		return name
	}
	return ""
}

// RouteConfig is a named route: a model with its own fallbacks and limits.
type RouteConfig struct {
	Model         string   `mapstructure:"model"`
	Fallbacks     []string `mapstructure:"fallbacks"`
	ContextWindow int      `mapstructure:"context_window"`
	MaxTokens     int      `mapstructure:"max_tokens"`
}

// ChannelsConfig holds every chat channel.
type ChannelsConfig struct {
	// Kinds holds each chat channel's section channels.<name>, keyed by
	// name, as a pointer to the channel's own struct (telegram.Config):
	// the channel table (internal/channels/kinds) gives Load the sections,
	// and each channel's Kind reads its own (Section). Not a key itself.
	Kinds map[string]any `mapstructure:"-"`
	// sections are the loader's descriptions of Kinds' sections, for
	// Validate and ChannelProblem.
	sections []ChannelSection
	// Transcription turns voice messages into text (OpenAI-compatible
	// /audio/transcriptions); empty base_url disables it.
	Transcription TranscriptionConfig `mapstructure:"transcription"`
	// Web is the browser chat and control panel on gateway.listen.
	Web WebChannelConfig `mapstructure:"web"`
}

// WebChannelConfig configures the browser chat and control panel served on
// gateway.listen (docs/web.md). It is closed by default: loopback only, and a
// login token.
type WebChannelConfig struct {
	Enabled bool `mapstructure:"enabled"`
	// AllowRemote lets gateway.listen be a non-loopback address while the
	// page is enabled; put it behind TLS (public_url https://...).
	AllowRemote bool `mapstructure:"allow_remote"`
	// Token is the login token; empty uses the token file web-token next to
	// the config (written by onboard, shown by `nanobot web token`).
	Token string `mapstructure:"token" secret:"true"`
	// SessionTTL is how long a browser stays logged in.
	SessionTTL time.Duration `mapstructure:"session_ttl"`
	// MaxUploadBytes caps one uploaded picture or file.
	MaxUploadBytes int64 `mapstructure:"max_upload_bytes"`
	// PublicURL is the page's address as browsers reach it (through a
	// reverse proxy), for /web login links; https marks the session cookie
	// Secure and silences the plain-HTTP warning.
	PublicURL string `mapstructure:"public_url"`
	// TrustedProxies are the reverse proxies (IP addresses or CIDR ranges)
	// whose X-Forwarded-For or Forwarded header names the client, for the
	// login limits; from any other address those headers are ignored.
	TrustedProxies []string `mapstructure:"trusted_proxies"`
}

// Access is the part every channel shares: who may talk to the bot
// (docs/channels.md#inbound-access-pairingstore-intake-lanes).
type Access struct {
	// Policy is "allowlist" (default), "open" or "pairing".
	Policy string `mapstructure:"policy"`
	// AllowFrom lists user ids ("*" allows everyone).
	AllowFrom []string `mapstructure:"allow_from"`
	// GroupPolicy is "mention" (default) or "open".
	GroupPolicy string `mapstructure:"group_policy"`
	// RatePerMinute caps the messages one sender may send per minute; more
	// are dropped, with one warning per minute.
	RatePerMinute int `mapstructure:"rate_per_minute"`
}

// OutputConfig is the part every channel shares about replies.
type OutputConfig struct {
	// Streaming shows the reply growing by editing one message.
	Streaming bool `mapstructure:"streaming"`
	// ToolHints shows a short status line while tools run.
	ToolHints bool `mapstructure:"tool_hints"`
	// EditInterval is the minimum time between edits of one message.
	EditInterval time.Duration `mapstructure:"edit_interval"`
	// TypingDelay is how long a turn runs before the typing indicator is
	// shown; an answer ready sooner arrives without one. 0 shows it at once.
	TypingDelay time.Duration `mapstructure:"typing_delay"`
}

// TranscriptionConfig points at an OpenAI-compatible transcription endpoint.
type TranscriptionConfig struct {
	BaseURL string `mapstructure:"base_url" secret:"url"`
	APIKey  string `mapstructure:"api_key" secret:"true"`
	Model   string `mapstructure:"model"`
}

// ToolsConfig configures the built-in and MCP tools.
type ToolsConfig struct {
	// RestrictToWorkspace confines file and shell tools to the workspace
	// (docs/tools.md#confinement).
	RestrictToWorkspace bool                       `mapstructure:"restrict_to_workspace"`
	Exec                ExecConfig                 `mapstructure:"exec"`
	Web                 WebConfig                  `mapstructure:"web"`
	MCPServers          map[string]MCPServerConfig `mapstructure:"mcp_servers"`
}

// ExecConfig configures the exec tool.
type ExecConfig struct {
	Enabled bool          `mapstructure:"enabled"`
	Timeout time.Duration `mapstructure:"timeout"`
	// MaxOutput caps captured output in characters.
	MaxOutput int `mapstructure:"max_output"`
	// DenyPatterns are extra regular expressions refused on top of the built-in list.
	DenyPatterns []string `mapstructure:"deny_patterns"`
	// Sandbox is ExecSandboxAuto, ExecSandboxRequired or ExecSandboxOff:
	// whether commands run confined by Landlock (docs/tools.md, Sandbox).
	Sandbox string `mapstructure:"sandbox"`
	// Network lets confined commands use TCP; false denies it where the
	// kernel's Landlock has TCP rules (ABI 4).
	Network bool `mapstructure:"network"`
	// ConnectPorts are TCP ports confined commands may connect to besides
	// 80 and 443 when Network is true (Landlock ABI 4); the daemon's own
	// ports (gateway.listen, NATS) are refused unless listed here.
	ConnectPorts []int `mapstructure:"connect_ports"`
	// Expose are paths outside the workspace confined commands may reach
	// (e.g. ~/.config/gh for the github skill).
	Expose []ExposeConfig `mapstructure:"expose"`
}

// Modes of tools.exec.sandbox (internal/sandbox has their meaning).
const (
	ExecSandboxAuto     = "auto"
	ExecSandboxRequired = "required"
	ExecSandboxOff      = "off"
)

// ExposeConfig is one path of tools.exec.expose.
type ExposeConfig struct {
	// Path is a file or directory; ~ and relative paths are resolved like
	// the workspace's.
	Path string `mapstructure:"path"`
	// Mode is "ro" (read, the default) or "rw".
	Mode string `mapstructure:"mode"`
}

// WebConfig configures web_search and web_fetch.
type WebConfig struct {
	// SearchProvider is "duckduckgo" (keyless, default) or "brave".
	SearchProvider string `mapstructure:"search_provider"`
	BraveAPIKey    string `mapstructure:"brave_api_key" secret:"true"`
	MaxResults     int    `mapstructure:"max_results"`
	// FetchMaxBytes caps a fetched response body.
	FetchMaxBytes int64 `mapstructure:"fetch_max_bytes"`
}

// MCPServerConfig is one Model Context Protocol server.
type MCPServerConfig struct {
	// Command/Args/Env/Cwd start a stdio server; URL/Headers reach an HTTP one.
	Command      string            `mapstructure:"command"`
	Args         []string          `mapstructure:"args"`
	Env          map[string]string `mapstructure:"env" secret:"names"`
	Cwd          string            `mapstructure:"cwd"`
	URL          string            `mapstructure:"url" secret:"url"`
	Headers      map[string]string `mapstructure:"headers" secret:"names"`
	ToolTimeout  time.Duration     `mapstructure:"tool_timeout"`
	EnabledTools []string          `mapstructure:"enabled_tools"`
	Disabled     bool              `mapstructure:"disabled"`
}

// GatewayConfig configures the long-running daemon.
type GatewayConfig struct {
	// Listen is the address of /healthz, /readyz, /metrics and webhooks.
	Listen        string          `mapstructure:"listen"`
	Heartbeat     HeartbeatConfig `mapstructure:"heartbeat"`
	ShutdownGrace time.Duration   `mapstructure:"shutdown_grace"`
	// AllowedHosts are further host names the listener answers to (the
	// Host header), besides loopback names, IP addresses, the listen host,
	// channels.web.public_url's and the Telegram webhook's: a name that
	// resolves to this machine but is not listed is refused, which defeats
	// DNS rebinding (docs/web.md, Security).
	AllowedHosts []string `mapstructure:"allowed_hosts"`
	// MaxConnections caps the listener's open connections; past it, idle
	// ones are closed first, and a small reserve answers only /healthz and
	// /readyz.
	MaxConnections int `mapstructure:"max_connections"`
	// IdleTimeout closes a keep-alive connection that sends nothing.
	IdleTimeout time.Duration `mapstructure:"idle_timeout"`
	// ReadTimeout bounds reading one request's body (uploads included);
	// answers and streams are not bounded by it.
	ReadTimeout time.Duration `mapstructure:"read_timeout"`
}

// APIConfig configures the OpenAI-compatible API served on gateway.listen
// (docs/api.md).
type APIConfig struct {
	// Keys maps a key's name to its bearer token. The name is what logs,
	// metrics and session keys (api:<name>:<id>) show; the token never
	// appears. No keys: every request is refused.
	Keys map[string]string `mapstructure:"keys" secret:"true"`
	// RatePerMinute is how many requests one key may start per minute, in
	// bursts of up to Burst.
	RatePerMinute int `mapstructure:"rate_per_minute"`
	Burst         int `mapstructure:"burst"`
	// MaxConcurrent is how many requests of one key may be answered at once.
	MaxConcurrent int `mapstructure:"max_concurrent"`
	// MaxBodyBytes caps a request body.
	MaxBodyBytes int64 `mapstructure:"max_body_bytes"`
	// MaxHistoryMessages caps the earlier messages a request re-sends (all
	// but the last); a request with more is refused with 400.
	MaxHistoryMessages int `mapstructure:"max_history_messages"`
	// MaxHistoryBytes caps the text of those earlier messages, in bytes.
	MaxHistoryBytes int64 `mapstructure:"max_history_bytes"`
	// MaxImages caps the inline images of a request's last message.
	MaxImages int `mapstructure:"max_images"`
	// TurnTimeout is how long a request waits for the agent's answer.
	TurnTimeout time.Duration `mapstructure:"turn_timeout"`
	// ToolHints sends the agent's tool hints as reasoning_content.
	ToolHints bool `mapstructure:"tool_hints"`
}

// HeartbeatConfig configures the periodic HEARTBEAT.md check
// (docs/schedule.md#the-heartbeat).
type HeartbeatConfig struct {
	Enabled  bool          `mapstructure:"enabled"`
	Interval time.Duration `mapstructure:"interval"`
}

// Bus backends (bus.backend).
const (
	// BusMemory is the in-process bus: one process runs channels and agent.
	BusMemory = "memory"
	// BusNATS carries the bus over NATS JetStream, so channels and agent
	// workers may run as separate processes (docs/scale-out.md).
	BusNATS = "nats"
)

// BusConfig says how channels and the agent exchange messages.
type BusConfig struct {
	// Backend is "memory" (default) or "nats".
	Backend string     `mapstructure:"backend"`
	NATS    NATSConfig `mapstructure:"nats"`
}

// NATSConfig reaches the NATS server of bus.backend: nats.
type NATSConfig struct {
	// URL is the server, or a comma-separated list of a cluster's servers.
	URL string `mapstructure:"url" secret:"nats"`
	// CredsFile is a NATS credentials file (JWT and NKey seed); empty
	// connects without one.
	CredsFile string  `mapstructure:"creds_file"`
	TLS       NATSTLS `mapstructure:"tls"`
	// Prefix starts every subject and (upper-cased) stream name, so several
	// bots may share one NATS account.
	Prefix string `mapstructure:"prefix"`
	// Partitions is how many inbound partitions the session keys are hashed
	// onto: the most chats in a turn at once across all workers.
	Partitions int `mapstructure:"partitions"`
	// AckWait is how long a worker may go silent before its message is
	// handed to another worker; it heartbeats every third of it.
	AckWait time.Duration `mapstructure:"ack_wait"`
	// LeaseTTL is how long the agent process that runs cron and the
	// heartbeat keeps its lease without renewing it (every third of it): a
	// dead leader is replaced after at most this long.
	LeaseTTL time.Duration `mapstructure:"lease_ttl"`
	// Sessions is where the agent workers of a split deployment keep
	// sessions: SessionsSharedVolume (default) or SessionsJetStream.
	Sessions string `mapstructure:"sessions"`
}

// Session stores of bus.nats.sessions (docs/scale-out.md).
const (
	// SessionsSharedVolume keeps sessions as JSONL files in the workspace,
	// a volume every worker mounts.
	SessionsSharedVolume = "shared-volume"
	// SessionsJetStream keeps sessions in the <PREFIX>_SESSIONS stream, one
	// subject per session, each write checked against the last sequence.
	SessionsJetStream = "jetstream"
)

// NATSTLS holds the TLS files for the NATS connection; all empty means the
// URL's scheme decides (tls:// uses the system roots).
type NATSTLS struct {
	CAFile   string `mapstructure:"ca_file"`
	CertFile string `mapstructure:"cert_file"`
	KeyFile  string `mapstructure:"key_file" secret:"no"` // a path
}

// LogConfig configures logging.
type LogConfig struct {
	// Level is debug, info, warn or error.
	Level string `mapstructure:"level"`
	// Format is "auto" (console on a TTY, JSON otherwise), "console" or "json".
	Format string `mapstructure:"format"`
}
