package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// isolateEnv unsets every NANOBOT_* variable and the given names for the
// duration of the test, so the developer's own environment cannot change
// what a test sees.
func isolateEnv(t *testing.T, names ...string) {
	t.Helper()
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, EnvPrefix+"_") {
			names = append(names, name)
		}
	}
	for _, name := range names {
		t.Setenv(name, "") // restores the old value at cleanup
		if err := os.Unsetenv(name); err != nil {
			t.Fatal(err)
		}
	}
}

// writeConfig writes a config file into a fresh directory and returns its path.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustLoad(t *testing.T, yaml string) *Config {
	t.Helper()
	cfg, err := Load(writeConfig(t, yaml), testSections...)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return cfg
}

func loadErr(t *testing.T, yaml string) string {
	t.Helper()
	_, err := Load(writeConfig(t, yaml), testSections...)
	if err == nil {
		t.Fatalf("Load succeeded, want an error")
	}
	return err.Error()
}

// field returns the field of cfg that a dotted key decodes into, following
// the same mapstructure tags as the decoder.
func field(t *testing.T, cfg *Config, key string) reflect.Value {
	t.Helper()
	v, ok := lookup(cfg, key)
	if !ok {
		t.Fatalf("%s: no such field", key)
	}
	return v
}

// lookup is field without a test: found false for an unknown key.
func lookup(cfg *Config, key string) (reflect.Value, bool) {
	v := reflect.ValueOf(cfg).Elem()
	for _, part := range strings.Split(key, ".") {
		if v.Type() == reflect.TypeFor[ChannelsConfig]() {
			if s, ok := v.Interface().(ChannelsConfig).Kinds[part]; ok {
				v = reflect.ValueOf(s).Elem() // a channel's section
				continue
			}
		}
		switch v.Kind() {
		case reflect.Map:
			v = v.MapIndex(reflect.ValueOf(part))
		case reflect.Struct:
			v = structField(v, part)
		}
		if !v.IsValid() {
			return v, false
		}
	}
	return v, true
}

func structField(v reflect.Value, key string) reflect.Value {
	for i := range v.NumField() {
		name, opts, _ := strings.Cut(v.Type().Field(i).Tag.Get("mapstructure"), ",")
		if opts == "squash" {
			if f := structField(v.Field(i), key); f.IsValid() {
				return f
			}
		}
		if name == key {
			return v.Field(i)
		}
	}
	return reflect.Value{}
}

func TestLoadEmptyFileGivesEveryDefault(t *testing.T) {
	isolateEnv(t)
	cfg := mustLoad(t, "")
	for key, def := range allDefaults() {
		got := field(t, cfg, key)
		want, err := convert(reflect.ValueOf(def), got)
		if err != nil {
			t.Fatalf("%s: default %v does not convert: %v", key, def, err)
		}
		if key == "agents.workspace" {
			home, _ := os.UserHomeDir()
			want = filepath.Join(home, ".nanobot", "workspace")
		}
		if key == "agents.sessions_dir" || key == "usage.dir" {
			continue // next to the config file: TestSessionsDirIsInTheDataDir
		}
		if got.Kind() == reflect.Slice {
			if got.Len() != 0 {
				t.Errorf("%s = %v, want empty", key, got)
			}
			continue
		}
		if !reflect.DeepEqual(got.Convert(reflect.TypeOf(want)).Interface(), want) {
			t.Errorf("%s = %v, want %v", key, got, want)
		}
	}
	for name, timeout := range map[string]time.Duration{"openai": 300 * time.Second, "anthropic": 300 * time.Second} {
		p := cfg.Providers[name]
		if p.Kind != name || p.Timeout != timeout || p.MaxRetries != 3 {
			t.Errorf("providers.%s = %+v, want kind %s, timeout %s, 3 retries", name, p, name, timeout)
		}
	}
	if cfg.Agents.Temperature != nil {
		t.Errorf("agents.temperature = %v, want unset", *cfg.Agents.Temperature)
	}
}

func TestLoadFileValues(t *testing.T) {
	isolateEnv(t)
	cfg := mustLoad(t, `
agents:
  workspace: /srv/bot
  model: ollama/llama3.2
  fallbacks: [openai/gpt-4o]
  max_tool_iterations: 12
  temperature: 0.3
  tool_timeout: 90s
providers:
  ollama:
    kind: openai
    base_url: http://localhost:11434/v1
    extra_headers: {X-Title: nanobot}
  openai:
    api_key: sk-file
channels:
  telegram:
    enabled: true
    token: "123:abc"
    allow_from: [12345, "@alice"]
    edit_interval: 1500ms
tools:
  mcp_servers:
    gh:
      command: gh-mcp
      env: {GITHUB_TOKEN: ghp_x}
gateway:
  heartbeat: {interval: 1h}
`)
	checks := []struct {
		name      string
		got, want any
	}{
		{"agents.workspace", cfg.Agents.Workspace, "/srv/bot"},
		{"agents.model", cfg.Agents.Model, "ollama/llama3.2"},
		{"agents.fallbacks", cfg.Agents.Fallbacks, []string{"openai/gpt-4o"}},
		{"agents.max_tool_iterations", cfg.Agents.MaxToolIterations, 12},
		{"agents.temperature", *cfg.Agents.Temperature, 0.3},
		{"agents.tool_timeout", cfg.Agents.ToolTimeout, 90 * time.Second},
		{"agents.memory_window (default kept)", cfg.Agents.MemoryWindow, 100},
		{"providers.ollama.kind", cfg.Providers["ollama"].Kind, "openai"},
		{"providers.ollama.timeout (entry default)", cfg.Providers["ollama"].Timeout, 300 * time.Second},
		{"providers.ollama.max_retries (entry default)", cfg.Providers["ollama"].MaxRetries, 3},
		{"providers.ollama.extra_headers (case kept)", cfg.Providers["ollama"].ExtraHeaders, map[string]string{"X-Title": "nanobot"}},
		{"providers.openai.api_key", cfg.Providers["openai"].APIKey, "sk-file"},
		{"providers.openai.base_url (default kept)", cfg.Providers["openai"].BaseURL, "https://api.openai.com/v1"},
		{"channels.telegram.allow_from (numbers become strings)", keyOf[[]string](t, cfg, "channels.telegram.allow_from"), []string{"12345", "@alice"}},
		{"channels.telegram.edit_interval", keyOf[time.Duration](t, cfg, "channels.telegram.edit_interval"), 1500 * time.Millisecond},
		{"channels.telegram.policy (default kept)", keyOf[string](t, cfg, "channels.telegram.policy"), "allowlist"},
		{"tools.mcp_servers.gh.env (case kept)", cfg.Tools.MCPServers["gh"].Env, map[string]string{"GITHUB_TOKEN": "ghp_x"}},
		{"tools.mcp_servers.gh.tool_timeout (entry default)", cfg.Tools.MCPServers["gh"].ToolTimeout, 60 * time.Second},
		{"gateway.heartbeat.interval", cfg.Gateway.Heartbeat.Interval, time.Hour},
		{"gateway.heartbeat.enabled (default kept)", cfg.Gateway.Heartbeat.Enabled, true},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.name, c.got, c.want)
		}
	}
}

func TestEmptySectionKeepsDefaults(t *testing.T) {
	isolateEnv(t)
	cfg := mustLoad(t, "channels:\n  telegram:\n  discord: ~\nagents:\n  fallbacks:\n")
	if keyOf[string](t, cfg, "channels.telegram.api_url") != "https://api.telegram.org" || keyOf[string](t, cfg, "channels.discord.policy") != "allowlist" {
		t.Errorf("empty sections lost their defaults: %+v", cfg.Channels)
	}
	t.Setenv("NANOBOT_CHANNELS_TELEGRAM_TOKEN", "123:tok")
	if cfg := mustLoad(t, "channels:\n  telegram:\n"); keyOf[string](t, cfg, "channels.telegram.token") != "123:tok" {
		t.Errorf("environment override lost under an empty section: %q", keyOf[string](t, cfg, "channels.telegram.token"))
	}
}

func TestEnvironmentOverrides(t *testing.T) {
	file := `
agents:
  model: openai/gpt-4o
  fallbacks: [anthropic/claude-haiku-4-5]
providers:
  ollama:
    kind: openai
    base_url: http://localhost:11434/v1
channels:
  telegram:
    allow_from: [1]
tools:
  mcp_servers:
    gh: {command: gh-mcp}
`
	tests := []struct {
		env, value string
		key        string // field to read
		want       any
	}{
		{"NANOBOT_AGENTS_MODEL", "anthropic/claude-sonnet-4-5", "agents.model", "anthropic/claude-sonnet-4-5"},
		{"NANOBOT_AGENTS_MAX_TOOL_ITERATIONS", "7", "agents.max_tool_iterations", 7},
		{"NANOBOT_AGENTS_TOOL_TIMEOUT", "2m", "agents.tool_timeout", 2 * time.Minute},
		{"NANOBOT_AGENTS_FALLBACKS", "a/b, c/d", "agents.fallbacks", []string{"a/b", "c/d"}},
		{"NANOBOT_CHANNELS_TELEGRAM_TOKEN", "123:tok", "channels.telegram.token", "123:tok"},
		{"NANOBOT_CHANNELS_TELEGRAM_ENABLED", "true", "channels.telegram.enabled", true},
		{"NANOBOT_CHANNELS_TELEGRAM_ALLOW_FROM", "1,2", "channels.telegram.allow_from", []string{"1", "2"}},
		{"NANOBOT_CHANNELS_DISCORD_ALLOW_GUILDS", "9", "channels.discord.allow_guilds", []string{"9"}},
		{"NANOBOT_CHANNELS_TELEGRAM_MAX_MEDIA_BYTES", "1024", "channels.telegram.max_media_bytes", int64(1024)},
		{"NANOBOT_PROVIDERS_OPENAI_API_KEY", "sk-env", "providers.openai.api_key", "sk-env"},
		{"NANOBOT_PROVIDERS_OLLAMA_API_KEY", "ollama-key", "providers.ollama.api_key", "ollama-key"},
		{"NANOBOT_PROVIDERS_OLLAMA_MAX_RETRIES", "0", "providers.ollama.max_retries", 0},
		{"NANOBOT_TOOLS_MCP_SERVERS_GH_TOOL_TIMEOUT", "5s", "tools.mcp_servers.gh.tool_timeout", 5 * time.Second},
		{"NANOBOT_GATEWAY_HEARTBEAT_INTERVAL", "10m", "gateway.heartbeat.interval", 10 * time.Minute},
		{"NANOBOT_LOG_LEVEL", "debug", "log.level", "debug"},
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			isolateEnv(t)
			t.Setenv(tt.env, tt.value)
			cfg := mustLoad(t, file)
			got := field(t, cfg, tt.key).Interface()
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("%s = %#v, want %#v", tt.key, got, tt.want)
			}
		})
	}
	t.Run("NANOBOT_AGENTS_TEMPERATURE", func(t *testing.T) {
		isolateEnv(t)
		t.Setenv("NANOBOT_AGENTS_TEMPERATURE", "0.25")
		cfg := mustLoad(t, file)
		if cfg.Agents.Temperature == nil || *cfg.Agents.Temperature != 0.25 {
			t.Errorf("agents.temperature = %v, want 0.25", cfg.Agents.Temperature)
		}
	})
	t.Run("bad environment value names the key", func(t *testing.T) {
		isolateEnv(t)
		t.Setenv("NANOBOT_AGENTS_MEMORY_WINDOW", "lots")
		msg := loadErr(t, file)
		if !strings.Contains(msg, `agents.memory_window: expected an integer, got "lots"`) {
			t.Errorf("error = %q", msg)
		}
	})
}

func TestEnvName(t *testing.T) {
	for key, want := range map[string]string{
		"agents.model":                    "NANOBOT_AGENTS_MODEL",
		"channels.telegram.allow_from":    "NANOBOT_CHANNELS_TELEGRAM_ALLOW_FROM",
		"tools.mcp_servers.my-server.url": "NANOBOT_TOOLS_MCP_SERVERS_MY_SERVER_URL",
	} {
		if got := EnvName(key); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestInterpolation(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string
		value string // YAML for providers.openai.api_key
		want  string
	}{
		{"variable", map[string]string{"KEY": "sk-1"}, `"${KEY}"`, "sk-1"},
		{"inside text", map[string]string{"KEY": "sk-1"}, `"Bearer ${KEY}!"`, "Bearer sk-1!"},
		{"two variables", map[string]string{"A": "x", "B": "y"}, `"${A}-${B}"`, "x-y"},
		{"default when unset", nil, `"${KEY:-fallback}"`, "fallback"},
		{"default when empty", map[string]string{"KEY": ""}, `"${KEY:-fallback}"`, "fallback"},
		{"set wins over default", map[string]string{"KEY": "sk-1"}, `"${KEY:-fallback}"`, "sk-1"},
		{"empty default", nil, `"${KEY:-}"`, ""},
		{"set but empty", map[string]string{"KEY": ""}, `"${KEY}"`, ""},
		{"dollar stays literal", nil, `"pa$$word$KEY$"`, "pa$$word$KEY$"},
		{"escaped reference", nil, `"$${KEY}"`, "${KEY}"},
		{"value is not expanded again", map[string]string{"KEY": "${OTHER}"}, `"${KEY}"`, "${OTHER}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			isolateEnv(t, "KEY", "A", "B", "OTHER")
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			cfg := mustLoad(t, "providers:\n  openai:\n    api_key: "+tt.value+"\n")
			if got := cfg.Providers["openai"].APIKey; got != tt.want {
				t.Errorf("api_key = %q, want %q", got, tt.want)
			}
		})
	}
	t.Run("lists, maps and non-string fields", func(t *testing.T) {
		isolateEnv(t, "ID", "TITLE", "ITER")
		t.Setenv("ID", "42")
		t.Setenv("TITLE", "bot")
		t.Setenv("ITER", "9")
		cfg := mustLoad(t, `
agents:
  max_tool_iterations: ${ITER}
providers:
  openai: {extra_headers: {X-Title: "${TITLE}"}}
channels:
  telegram: {allow_from: ["${ID}", 7]}
`)
		if got := keyOf[[]string](t, cfg, "channels.telegram.allow_from"); !reflect.DeepEqual(got, []string{"42", "7"}) {
			t.Errorf("allow_from = %v", got)
		}
		if got := cfg.Providers["openai"].ExtraHeaders["X-Title"]; got != "bot" {
			t.Errorf("extra_headers.X-Title = %q", got)
		}
		if got := cfg.Agents.MaxToolIterations; got != 9 {
			t.Errorf("max_tool_iterations = %d", got)
		}
	})
	t.Run("environment overrides are expanded too", func(t *testing.T) {
		isolateEnv(t, "KEY")
		t.Setenv("KEY", "sk-2")
		t.Setenv("NANOBOT_PROVIDERS_OPENAI_API_KEY", "${KEY}")
		if got := mustLoad(t, "").Providers["openai"].APIKey; got != "sk-2" {
			t.Errorf("api_key = %q", got)
		}
	})
}

func TestInterpolationErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"unset variable names key and variable",
			"agents:\n  model: ${NANOBOT_TEST_UNSET}\n",
			[]string{"agents.model: environment variable NANOBOT_TEST_UNSET is not set", "line 2"}},
		{"unset in a list item",
			"channels:\n  telegram:\n    allow_from: [\"${NANOBOT_TEST_UNSET}\"]\n",
			[]string{"channels.telegram.allow_from[0]: environment variable NANOBOT_TEST_UNSET is not set"}},
		{"unterminated",
			"providers:\n  openai:\n    api_key: \"ab${cd\"\n",
			[]string{"providers.openai.api_key: \"${\" without a closing \"}\""}},
		{"invalid name",
			"providers:\n  openai:\n    api_key: \"${A-B}\"\n",
			[]string{"providers.openai.api_key: invalid variable reference ${A-B}"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			isolateEnv(t, "NANOBOT_TEST_UNSET")
			msg := loadErr(t, tt.yaml)
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

// TestUnsetSecretIsMissingNotAnError: a secret whose variable is unset loads
// as empty, recorded with its variable, in every kind of secret key; a set one
// is recorded too, so an error can name the variable to fix.
func TestUnsetSecretIsMissingNotAnError(t *testing.T) {
	isolateEnv(t, "NB_UNSET", "NB_SET")
	t.Setenv("NB_SET", "sk-set-0123456789")
	cfg := mustLoad(t, `
providers:
  openai:
    api_key: ${NB_SET}
  anthropic:
    api_key: ${NB_UNSET}
    extra_headers: {Authorization: "Bearer ${NB_UNSET}", X-Title: bot}
channels:
  telegram:
    token: ${NB_UNSET}
  discord:
    token: "${NB_UNSET}"
api:
  keys: {alice: "${NB_UNSET}"}
tools:
  web: {brave_api_key: "${NB_UNSET}"}
  mcp_servers:
    gh: {command: gh-mcp, env: {GITHUB_TOKEN: "${NB_UNSET}"}}
`)
	want := map[string]SecretVar{
		"providers.openai.api_key":                        {Name: "NB_SET", Set: true},
		"providers.anthropic.api_key":                     {Name: "NB_UNSET"},
		"providers.anthropic.extra_headers.Authorization": {Name: "NB_UNSET"},
		"channels.telegram.token":                         {Name: "NB_UNSET"},
		"channels.discord.token":                          {Name: "NB_UNSET"},
		"api.keys.alice":                                  {Name: "NB_UNSET"},
		"tools.web.brave_api_key":                         {Name: "NB_UNSET"},
		"tools.mcp_servers.gh.env.GITHUB_TOKEN":           {Name: "NB_UNSET"},
	}
	if !reflect.DeepEqual(cfg.SecretVars, want) {
		t.Errorf("SecretVars = %v\nwant %v", cfg.SecretVars, want)
	}
	if cfg.Providers["anthropic"].APIKey != "" || cfg.Providers["anthropic"].ExtraHeaders["Authorization"] != "" {
		t.Errorf("an unset secret should load empty: %+v", cfg.Providers["anthropic"])
	}
	if p := cfg.ProviderProblem("anthropic"); !strings.Contains(p, "NB_UNSET is not set") || strings.Contains(p, ":-default") {
		t.Errorf("ProviderProblem = %q, want the variable named and no default advised", p)
	}
	if p := cfg.ProviderProblem("openai"); p != "" {
		t.Errorf("ProviderProblem(openai) = %q, want none", p)
	}
	if p := cfg.ChannelProblem("telegram"); !strings.Contains(p, "NB_UNSET is not set") {
		t.Errorf("ChannelProblem = %q", p)
	}
	if v := cfg.KeyVar("openai"); v != "NB_SET" {
		t.Errorf("KeyVar(openai) = %q", v)
	}
}

func TestExpand(t *testing.T) {
	env := map[string]string{"A": "1", "EMPTY": ""}
	lookup := func(name string) (string, bool) { v, ok := env[name]; return v, ok }
	tests := []struct {
		in, want, err string
	}{
		{in: "", want: ""},
		{in: "plain", want: "plain"},
		{in: "$A", want: "$A"},
		{in: "${A}", want: "1"},
		{in: "x${A}y${A}z", want: "x1y1z"},
		{in: "${EMPTY}", want: ""},
		{in: "${EMPTY:-d}", want: "d"},
		{in: "${MISSING:-d:-e}", want: "d:-e"},
		{in: "$${A}", want: "${A}"},
		{in: "$$${A}", want: "$${A}"},
		{in: "${MISSING}", err: "MISSING is not set"},
		{in: "${}", err: "invalid variable reference"},
		{in: "${1A}", err: "invalid variable reference"},
		{in: "${A", err: "without a closing"},
	}
	for _, tt := range tests {
		got, err := expand(tt.in, lookup)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("expand(%q) error = %v, want %q", tt.in, err, tt.err)
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("expand(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestUnknownKeys(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"nested typo with suggestion", "channels:\n  telegram:\n    tokn: x\n",
			`channels.telegram.tokn: unknown key (line 3; did you mean "token"?)`},
		{"top level", "agent:\n  model: x/y\n", `agent: unknown key (line 1; did you mean "agents"?)`},
		{"no close match", "agents:\n  colour: red\n", "agents.colour: unknown key (line 2)"},
		{"inside a provider entry", "providers:\n  ollama:\n    kind: openai\n    baseurl: http://x\n",
			`providers.ollama.baseurl: unknown key (line 4; did you mean "base_url"?)`},
		{"inside an MCP server", "tools:\n  mcp_servers:\n    gh:\n      comand: x\n",
			`tools.mcp_servers.gh.comand: unknown key (line 4; did you mean "command"?)`},
		{"keys are case-sensitive", "agents:\n  Model: openai/x\n", `agents.Model: unknown key (line 2; did you mean "model"?)`},
		{"squashed fields are known, others not", "channels:\n  discord:\n    mode: polling\n",
			"channels.discord.mode: unknown key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			isolateEnv(t)
			if msg := loadErr(t, tt.yaml); !strings.Contains(msg, tt.want) {
				t.Errorf("error = %q\nwant it to contain %q", msg, tt.want)
			}
		})
	}
}

func TestWrongTypes(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"integer", "agents:\n  max_tool_iterations: many\n", `agents.max_tool_iterations: expected an integer, got "many" (line 2)`},
		{"fraction for integer", "agents:\n  memory_window: 10.5\n", "agents.memory_window: expected an integer, got 10.5"},
		{"bool", "channels:\n  telegram:\n    enabled: maybe\n", `channels.telegram.enabled: expected true or false, got "maybe"`},
		{"number for bool", "channels:\n  telegram:\n    enabled: 1\n", "channels.telegram.enabled: expected true or false, got 1"},
		{"yes for bool", "channels:\n  telegram:\n    enabled: yes\n", `channels.telegram.enabled: expected true or false, got "yes"`},
		{"duration without unit", "agents:\n  tool_timeout: 60\n", `agents.tool_timeout: expected a duration with a unit such as "60s" or "5m", got 60`},
		{"bad duration", "agents:\n  tool_timeout: soon\n", `agents.tool_timeout: expected a duration such as "60s", "5m" or "1h30m", got "soon"`},
		{"mapping for string", "agents:\n  model: {a: b}\n", "agents.model: expected a string, got a mapping"},
		{"bool for string", "log:\n  level: true\n", "log.level: expected a string, got true"},
		{"string for list", "agents:\n  fallbacks: {a: b}\n", "agents.fallbacks: expected a list, got a mapping"},
		{"scalar for section", "agents: fast\n", `agents: expected a mapping (key: value), got "fast"`},
		{"scalar for provider", "providers:\n  ollama: local\n", `providers.ollama: expected a mapping (key: value), got "local"`},
		{"list item", "channels:\n  telegram:\n    allow_from: [[1]]\n", "channels.telegram.allow_from[0]: expected a string, got a list"},
		{"number for temperature", "agents:\n  temperature: hot\n", `agents.temperature: expected a number, got "hot"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			isolateEnv(t)
			if msg := loadErr(t, tt.yaml); !strings.Contains(msg, tt.want) {
				t.Errorf("error = %q\nwant it to contain %q", msg, tt.want)
			}
		})
	}
}

func TestAllProblemsAtOnce(t *testing.T) {
	isolateEnv(t, "NANOBOT_TEST_UNSET")
	msg := loadErr(t, `
agents:
  max_tool_iterations: many
  tool_timeout: 60
channels:
  telegram:
    tokn: x
    allow_from: ["${NANOBOT_TEST_UNSET}"]
`)
	for _, want := range []string{"4 problems", "agents.max_tool_iterations:", "agents.tool_timeout:",
		"channels.telegram.tokn:", "channels.telegram.allow_from[0]:"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not contain %q:\n%s", want, msg)
		}
	}
}

func TestBadYAMLNamesFileAndLine(t *testing.T) {
	isolateEnv(t)
	tests := []struct {
		name, yaml, want string
	}{
		{"syntax", "agents:\n  model: x\n  oops\nlog: {}\n", ":3: could not find expected ':'"},
		{"syntax on the first line", "a: b: c\n", ":1: mapping values are not allowed"},
		{"tab indentation", "agents:\n\tmodel: x\n", ":2: "},
		{"duplicate key", "agents:\n  model: a\n  model: b\n", "line 3"},
		{"top level list", "- a\n- b\n", ":1: the top level must be a mapping"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.yaml)
			_, err := Load(path, testSections...)
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want the path %s and %q", err, path, tt.want)
			}
		})
	}
}

func TestMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.yaml")
	_, err := Load(path, testSections...)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("error = %v, want fs.ErrNotExist", err)
	}
	if !strings.Contains(err.Error(), "nanobot onboard") || !strings.Contains(err.Error(), path) {
		t.Errorf("error = %q, want the path and a hint to run nanobot onboard", err)
	}
}

func TestLoadDefaultPath(t *testing.T) {
	isolateEnv(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	if got, want := DefaultPath(), filepath.Join(home, ".nanobot", "config.yaml"); got != want {
		t.Fatalf("DefaultPath() = %q, want %q", got, want)
	}
	if _, err := Load("", testSections...); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load(\"\") without a file: %v, want fs.ErrNotExist", err)
	}
	if err := WriteStarter(DefaultPath(), []byte("log: {level: debug}\n")); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load("", testSections...)
	if err != nil || cfg.Log.Level != "debug" {
		t.Fatalf("Load(\"\") = %+v, %v; want the file at the default path", cfg, err)
	}
}

func TestWorkspacePath(t *testing.T) {
	isolateEnv(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	tests := []struct {
		value string
		want  func(dir string) string
	}{
		{"~", func(string) string { return home }},
		{"~/bot/ws", func(string) string { return filepath.Join(home, "bot", "ws") }},
		{"/abs/ws", func(string) string { return "/abs/ws" }},
		{"ws", func(dir string) string { return filepath.Join(dir, "ws") }},
		{"../ws", func(dir string) string { return filepath.Join(filepath.Dir(dir), "ws") }},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			path := writeConfig(t, "agents:\n  workspace: \""+tt.value+"\"\n")
			cfg, err := Load(path, testSections...)
			if err != nil {
				t.Fatal(err)
			}
			if want := tt.want(filepath.Dir(path)); cfg.Agents.Workspace != want {
				t.Errorf("workspace = %q, want %q", cfg.Agents.Workspace, want)
			}
		})
	}
}

func TestDefaultsMatchTheSchema(t *testing.T) {
	known := map[string]bool{}
	for _, f := range allSchemaFields() {
		known[f.path] = true
	}
	for key := range allDefaults() {
		if !known[key] && !known[wildcard(key)] {
			t.Errorf("defaults has %q, which no struct field decodes", key)
		}
	}
	for key := range providerDefaults {
		if !known["providers.*."+key] {
			t.Errorf("providerDefaults has %q, which ProviderConfig lacks", key)
		}
	}
	for key := range mcpServerDefaults {
		if !known["tools.mcp_servers.*."+key] {
			t.Errorf("mcpServerDefaults has %q, which MCPServerConfig lacks", key)
		}
	}
}

// wildcard replaces the entry name of a key under a map section by "*".
func wildcard(key string) string {
	for _, section := range []string{"providers.", "routes.", "tools.mcp_servers."} {
		if rest, ok := strings.CutPrefix(key, section); ok {
			if _, field, ok := strings.Cut(rest, "."); ok {
				return section + "*." + field
			}
		}
	}
	return key
}

func TestConvert(t *testing.T) {
	var (
		s   string
		i   int
		i8  int8
		f   float64
		b   bool
		d   time.Duration
		l   []string
		m   map[string]string
		pcs ProviderConfig
	)
	tests := []struct {
		in     any
		target any // pointer to a value of the target type
		want   any
		err    string
	}{
		{in: 12345, target: &s, want: "12345"},
		{in: int64(-7), target: &s, want: "-7"},
		{in: uint64(1 << 63), target: &s, want: "9223372036854775808"},
		{in: 1e6, target: &s, want: "1000000"},
		{in: 1.5, target: &s, want: "1.5"},
		{in: []any{"a"}, target: &s, err: "expected a string, got a list"},
		{in: " 42 ", target: &i, want: int64(42)},
		{in: 42.0, target: &i, want: int64(42)},
		{in: uint64(1 << 63), target: &i, err: "expected a smaller integer, got 9223372036854775808"},
		{in: 300, target: &i8, err: "expected a smaller integer, got 300"},
		{in: true, target: &i, err: "expected an integer, got true"},
		{in: 2, target: &f, want: 2.0},
		{in: int64(2), target: &f, want: 2.0},
		{in: uint64(2), target: &f, want: 2.0},
		{in: "0.5", target: &f, want: 0.5},
		{in: "0", target: &b, want: false},
		{in: nil, target: &b, err: "expected true or false, got nothing"},
		{in: "1h30m", target: &d, want: 90 * time.Minute},
		{in: "a, ,b,", target: &l, want: []string{"a", "b"}},
		{in: "", target: &l, want: []string{}},
		{in: 5, target: &l, err: "expected a list, got 5"},
		{in: map[string]any{"A": "b"}, target: &m, want: map[string]any{"A": "b"}},
		{in: []any{}, target: &pcs, err: "expected a mapping (key: value), got a list"},
	}
	for _, tt := range tests {
		got, err := convert(reflect.ValueOf(tt.in), reflect.ValueOf(tt.target).Elem())
		switch {
		case tt.err != "":
			if err == nil || err.Error() != tt.err {
				t.Errorf("convert(%#v → %T) error = %v, want %q", tt.in, tt.target, err, tt.err)
			}
		case err != nil || !reflect.DeepEqual(got, tt.want):
			t.Errorf("convert(%#v → %T) = %#v, %v; want %#v", tt.in, tt.target, got, err, tt.want)
		}
	}
}

func TestNonStringKeysAndNulls(t *testing.T) {
	isolateEnv(t)
	cfg := mustLoad(t, `
providers:
  openai:
    extra_headers: {1: one, X-Empty: ~}
`)
	if got := cfg.Providers["openai"].ExtraHeaders; !reflect.DeepEqual(got, map[string]string{"1": "one"}) {
		t.Errorf("extra_headers = %#v", got)
	}
}

// providers.gemini needs only a key: the name implies kind gemini and the
// Gemini API's address; another name with kind gemini gets the address too.
func TestGeminiProviderDefaults(t *testing.T) {
	isolateEnv(t)
	cfg := mustLoad(t, "providers:\n  gemini: {api_key: k}\n  google: {kind: gemini, api_key: k}\n  proxy: {kind: gemini, base_url: \"http://127.0.0.1:9/v1beta\"}\n")
	for name, want := range map[string]string{"gemini": GeminiBaseURL, "google": GeminiBaseURL, "proxy": "http://127.0.0.1:9/v1beta"} {
		if p := cfg.Providers[name]; p.Kind != "gemini" || p.BaseURL != want {
			t.Errorf("providers.%s = kind %q base_url %q, want gemini at %s", name, p.Kind, p.BaseURL, want)
		}
	}
	if r, err := cfg.ResolveRoute("gemini/gemini-2.5-flash"); err != nil || r.ProviderConfig.Kind != "gemini" {
		t.Errorf("route: %+v, %v", r, err)
	}
}

// TestSessionsDirIsInTheDataDir: sessions default to sessions/ next to the
// config file (the data dir, which also holds web-token and pairing.json),
// outside the workspace; ~ and relative paths resolve as the workspace's do.
func TestSessionsDirIsInTheDataDir(t *testing.T) {
	isolateEnv(t)
	home, _ := os.UserHomeDir()
	for _, tt := range []struct{ yaml, want string }{
		{"", "sessions"},
		{"agents:\n  sessions_dir: chats\n", "chats"},
		{"agents:\n  sessions_dir: ~/elsewhere/sessions\n", filepath.Join(home, "elsewhere", "sessions")},
		{"agents:\n  sessions_dir: /srv/nanobot/sessions\n", "/srv/nanobot/sessions"},
	} {
		path := writeConfig(t, tt.yaml)
		cfg, err := Load(path, testSections...)
		if err != nil {
			t.Fatal(err)
		}
		want := tt.want
		if !filepath.IsAbs(want) {
			dir, _ := filepath.Abs(filepath.Dir(path))
			want = filepath.Join(dir, want)
		}
		if cfg.Agents.SessionsDir != want {
			t.Errorf("%q: sessions_dir = %s, want %s", tt.yaml, cfg.Agents.SessionsDir, want)
		}
		if err := cfg.Validate(); err != nil && strings.Contains(err.Error(), "sessions_dir") {
			t.Errorf("%q: %v", tt.yaml, err)
		}
	}
}

// TestSecretsOverlay: the overlay beside the config lays its secrets over
// the file's references (so no variable is missing any more), a NANOBOT_*
// variable still wins, and a key the overlay may not set is refused.
func TestSecretsOverlay(t *testing.T) {
	isolateEnv(t, "NB_OVERLAY_UNSET")
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte("providers:\n  openai:\n    api_key: ${NB_OVERLAY_UNSET}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data, err := WriteOverlayData(map[string]string{"providers.openai.api_key": "sk-from-the-page-${x}", "channels.telegram.token": "1:abc"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, SecretsFile), data, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path, testSections...)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Providers["openai"].APIKey; got != "sk-from-the-page-${x}" {
		t.Errorf("api_key = %q, want the overlay's, literally", got)
	}
	if p := cfg.ProviderProblem("openai"); p != "" {
		t.Errorf("ProviderProblem = %q, want none", p)
	}
	if got := keyOf[string](t, cfg, "channels.telegram.token"); got != "1:abc" {
		t.Errorf("token = %q", got)
	}
	t.Setenv("NANOBOT_PROVIDERS_OPENAI_API_KEY", "sk-from-env")
	if cfg, err := Load(path, testSections...); err != nil || cfg.Providers["openai"].APIKey != "sk-from-env" {
		t.Errorf("env should win over the overlay: %v", err)
	}
	if _, err := WriteOverlayData(map[string]string{"agents.model": "x"}); err == nil {
		t.Error("WriteOverlayData took a key that is not a secret")
	}
	if err := os.WriteFile(filepath.Join(dir, SecretsFile), []byte("agents:\n  model: x/y\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path, testSections...); err == nil || !strings.Contains(err.Error(), "agents.model: not a key the secrets file may set") {
		t.Errorf("Load with a foreign key in the overlay: %v", err)
	}
}

// TestLoadPricesKeyedByRouteModel: a price's key is a route model whose
// dots (gpt-4.1) are part of the name, not nesting.
func TestLoadPricesKeyedByRouteModel(t *testing.T) {
	isolateEnv(t)
	cfg := mustLoad(t, `
providers:
  openai: {api_key: sk-test-0123456789}
prices:
  openai/gpt-4.1: {input: 2, output: 8, cache_read: 0.5}
  ollama/llama3.1:8b: {input: 0, output: 0}
budget:
  daily: 2
  timezone: Europe/Berlin
  chats:
    "telegram:42": {daily: 0.5}
  origins:
    heartbeat: {monthly: 1}
`)
	if got := cfg.Prices["openai/gpt-4.1"]; got != (PriceConfig{Input: 2, Output: 8, CacheRead: 0.5}) {
		t.Errorf("prices = %+v", cfg.Prices)
	}
	if _, ok := cfg.Prices["ollama/llama3.1:8b"]; !ok || len(cfg.Prices) != 2 {
		t.Errorf("prices = %+v", cfg.Prices)
	}
	if cfg.Budget.Daily != 2 || cfg.Budget.WarnAt != 0.8 || cfg.Budget.Chats["telegram:42"].Daily != 0.5 || cfg.Budget.Origins["heartbeat"].Monthly != 1 {
		t.Errorf("budget = %+v", cfg.Budget)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}
