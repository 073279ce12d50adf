package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"
)

// EnvPrefix starts every environment variable that overrides a key:
// agents.model is NANOBOT_AGENTS_MODEL.
const EnvPrefix = "NANOBOT"

// EnvName is the environment variable that overrides key ("channels.telegram.allow_from"
// → "NANOBOT_CHANNELS_TELEGRAM_ALLOW_FROM"). Dots and dashes become underscores.
func EnvName(key string) string {
	return EnvPrefix + "_" + strings.ToUpper(envReplacer.Replace(key))
}

var envReplacer = strings.NewReplacer(".", "_", "-", "_")

// DefaultPath is where the configuration lives unless --config says
// otherwise: ~/.nanobot/config.yaml.
func DefaultPath() string {
	p, err := defaultPath()
	if err != nil {
		// Without a home directory, a path relative to the working
		// directory is the only honest guess; Load("") reports the cause.
		return filepath.Join(".nanobot", "config.yaml")
	}
	return p
}

func defaultPath() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("default config path: %w", err)
	}
	return filepath.Join(home, ".nanobot", "config.yaml"), nil
}

// Load reads the YAML file at path ("" means DefaultPath), lays it over the
// defaults, lays the secrets overlay beside it over both (SecretsFile), lets
// NANOBOT_* environment variables override any key, expands
// ${VAR} references and decodes the result strictly: unknown keys and values
// of the wrong type are all reported at once, each with its key path.
//
// Load does not check that values make sense together; call Validate. A
// missing file is reported with a hint to run `nanobot onboard` and matches
// errors.Is(err, fs.ErrNotExist).
//
// sections are the chat channels' sections (channels.<name>) the file may
// hold, from the channel table (internal/channels/kinds.Sections); each is
// decoded into its channel's own struct in Channels.Kinds.
func Load(path string, sections ...ChannelSection) (*Config, error) {
	cfg, errs, err := load(path, sections)
	if err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return nil, problems("config "+path, errs)
	}
	return cfg, nil
}

// LoadPartial is Load for `nanobot doctor`, which reports every problem and
// still checks the rest: it returns the problems one by one and, beside
// them, the configuration as far as it could be read — the file's values
// where they decode, the defaults elsewhere (the defaults alone when the
// file does not parse). err is set only when the file cannot be read.
func LoadPartial(path string, sections ...ChannelSection) (*Config, []error, error) {
	cfg, errs, err := load(path, sections)
	if err != nil && !strings.Contains(err.Error(), "(YAML syntax)") && !strings.Contains(err.Error(), "must be a mapping") {
		return nil, nil, err
	}
	if err != nil {
		errs = []error{err}
	}
	if cfg == nil {
		d := Defaults(sections...)
		dir := filepath.Dir(path)
		if abs, aerr := filepath.Abs(dir); aerr == nil {
			dir = abs
		}
		finish(&d, dir)
		cfg = &d
	}
	return cfg, errs, nil
}

// load reads path into a config and its problems (cfg may be set beside
// problems: what decoded); err is a file that cannot be read or parsed.
func load(path string, sections []ChannelSection) (*Config, []error, error) {
	if path == "" {
		p, err := defaultPath()
		if err != nil {
			return nil, nil, err
		}
		path = p
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("config %s: %w (run `nanobot onboard` to create it, or pass --config)", path, err)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("config %s: %w", path, err)
	}
	raw, lines, err := parseYAML(path, data)
	if err != nil {
		return nil, nil, err
	}
	dir := filepath.Dir(path)
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	var errs []error
	if err := applyOverlay(raw, dir); err != nil {
		errs = append(errs, err)
	}
	cfg, buildErrs := build(raw, lines, os.LookupEnv, true, sections)
	errs = append(errs, buildErrs...)
	if cfg != nil {
		finish(cfg, dir)
	}
	return cfg, errs, nil
}

// problems joins errs under a heading; several problems each get a line.
func problems(heading string, errs []error) error {
	if len(errs) == 1 {
		return fmt.Errorf("%s: %w", heading, errs[0])
	}
	return fmt.Errorf("%s: %d problems:\n%w", heading, len(errs), errors.Join(errs...))
}

// yamlLine reads the line out of a YAML syntax error; it is compiled only
// when there is one.
var yamlLine = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^yaml: line (\d+): (.*)$`) })

// parseYAML reads the file into a tree of map[string]any with nulls dropped
// (an empty `telegram:` means "use the defaults") and records the line of
// every key for error messages. Errors name the file and the line.
func parseYAML(path string, data []byte) (map[string]any, lineIndex, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		if m := yamlLine().FindStringSubmatch(err.Error()); m != nil {
			return nil, nil, fmt.Errorf("config %s:%s: %s (YAML syntax)", path, m[1], m[2])
		}
		// yaml.v3 leaves the line out when it is the first one.
		if msg, ok := strings.CutPrefix(err.Error(), "yaml: "); ok {
			return nil, nil, fmt.Errorf("config %s:1: %s (YAML syntax)", path, msg)
		}
		return nil, nil, fmt.Errorf("config %s: %w", path, err)
	}
	if len(doc.Content) == 0 { // empty file: all defaults
		return map[string]any{}, lineIndex{}, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, nil, fmt.Errorf("config %s:%d: the top level must be a mapping of sections (agents:, providers:, ...)", path, root.Line)
	}
	var tree any
	if err := root.Decode(&tree); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			return nil, nil, fmt.Errorf("config %s: %s", path, strings.Join(te.Errors, "; "))
		}
		return nil, nil, fmt.Errorf("config %s: %w", path, err)
	}
	lines := lineIndex{}
	lines.index("", root)
	m, _ := normalize(tree).(map[string]any)
	return m, lines, nil
}

// normalize gives every mapping string keys (YAML allows `1: x`) and drops
// null values, so the tree is what viper and the decoder expect.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			if val != nil {
				out[k] = normalize(val)
			}
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			if val != nil {
				out[fmt.Sprint(k)] = normalize(val)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = normalize(val)
		}
		return out
	}
	return v
}

// lineIndex maps a key path to the line of the file that sets it.
type lineIndex map[string]int

func (l lineIndex) index(path string, n *yaml.Node) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := joinPath(path, n.Content[i].Value)
			l[p] = n.Content[i].Line
			l.index(p, n.Content[i+1])
		}
	case yaml.SequenceNode:
		for i, item := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			l[p] = item.Line
			l.index(p, item)
		}
	}
}

// hint is the parenthesised tail of an error message: where the key is in
// the file (when it came from the file) and a suggested spelling.
func (l lineIndex) hint(path, suggestion string) string {
	var parts []string
	if line, ok := l[path]; ok {
		parts = append(parts, fmt.Sprintf("line %d", line))
	}
	if suggestion != "" {
		parts = append(parts, fmt.Sprintf("did you mean %q?", suggestion))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

// build layers the file over the defaults and the environment over both,
// then expands, checks and decodes the result.
func build(raw map[string]any, lines lineIndex, lookup lookupFunc, env bool, sections []ChannelSection) (*Config, []error) {
	v := viper.New()
	if env {
		v.SetEnvPrefix(EnvPrefix)
		v.SetEnvKeyReplacer(envReplacer)
		v.AutomaticEnv()
	}
	for k, val := range defaults {
		v.SetDefault(k, val)
	}
	// AutomaticEnv only sees keys viper knows of; bind the rest so that
	// NANOBOT_AGENTS_TEMPERATURE or NANOBOT_PROVIDERS_OLLAMA_API_KEY work even
	// when the file does not mention them.
	if env {
		bindEnvs(v, "", reflect.TypeFor[Config]())
	}
	for _, name := range entryNames(raw, []string{"providers"}, "openai", "anthropic") {
		registerEntry(v, "providers."+name, reflect.TypeFor[ProviderConfig](), providerDefaults, env)
	}
	for _, s := range sections {
		registerEntry(v, "channels."+s.Name, s.Type, s.Defaults, env)
	}
	for _, name := range entryNames(raw, []string{"tools", "mcp_servers"}) {
		registerEntry(v, "tools.mcp_servers."+name, reflect.TypeFor[MCPServerConfig](), mcpServerDefaults, env)
	}
	for _, name := range entryNames(raw, []string{"routes"}) {
		registerEntry(v, "routes."+name, reflect.TypeFor[RouteConfig](), nil, env)
	}
	// prices: is keyed by route models, which hold dots (openai/gpt-4.1)
	// that viper would read as nesting; it bypasses viper whole.
	prices, hasPrices := raw["prices"]
	if hasPrices {
		raw = maps.Clone(raw)
		delete(raw, "prices")
	}
	if err := v.MergeConfigMap(normalize(raw).(map[string]any)); err != nil { // viper lower-cases a copy
		return nil, []error{fmt.Errorf("merge: %w", err)}
	}
	settings := v.AllSettings()
	restoreCase(settings, raw)
	if hasPrices {
		settings["prices"] = prices
	}

	var errs []error
	vars := map[string]SecretVar{}
	for _, key := range slices.Sorted(maps.Keys(settings)) {
		var e []error
		settings[key], e = interpolate(key, settings[key], lookup, lines, vars)
		errs = append(errs, e...)
	}
	errs = append(errs, checkKeys("", settings, reflect.TypeFor[Config](), lines, sections)...)
	sectionSettings, splitErrs := splitSections(settings, sections)
	errs = append(errs, splitErrs...)
	cfg, decodeErrs := decode(settings, lines)
	errs = append(errs, decodeErrs...)
	for _, s := range sections {
		v, e := decodeSection(s, sectionSettings[s.Name], lines)
		errs = append(errs, e...)
		if cfg != nil && v != nil {
			cfg.Channels.add(s, v)
		}
	}
	if cfg != nil && len(vars) > 0 {
		cfg.SecretVars = vars
	}
	// One problem per key, in key order, whatever stage found it.
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return cfg, errs
}

// bindEnvs binds the environment variable of every key under t that can be
// written as one string: scalars and comma-separated lists, not the entries
// of maps.
func bindEnvs(v *viper.Viper, prefix string, t reflect.Type) {
	for _, f := range schemaFields(prefix, t) {
		if !strings.Contains(f.path, "*") && deref(f.typ).Kind() != reflect.Map {
			// BindEnv fails only without a key.
			_ = v.BindEnv(f.path, EnvName(f.path))
		}
	}
}

// entryNames lists the entry names under a map section of the file (path
// is its elements: "tools", "mcp_servers"), plus the names in always.
func entryNames(raw map[string]any, path []string, always ...string) []string {
	names := slices.Clone(always)
	var node any = raw
	for _, p := range path {
		m, _ := node.(map[string]any)
		node = m[p] // a nil map reads as nil
	}
	if m, ok := node.(map[string]any); ok {
		for name := range m {
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	return names
}

// registerEntry gives one named entry its defaults and, with env, binds the
// environment variable of each of its keys.
func registerEntry(v *viper.Viper, prefix string, t reflect.Type, entryDefaults map[string]any, env bool) {
	for k, val := range entryDefaults {
		v.SetDefault(prefix+"."+k, val)
	}
	if env {
		bindEnvs(v, prefix, t)
	}
}

// restoreCase puts back the spelling of keys the file wrote in capitals,
// which viper lower-cases: header names, MCP env variables
// (GITHUB_TOKEN), entry names, and misspelt keys (reported as unknown).
func restoreCase(settings, raw map[string]any) {
	for k, rv := range raw {
		lk := strings.ToLower(k)
		sv, ok := settings[lk]
		if !ok {
			continue
		}
		if lk != k {
			delete(settings, lk)
			settings[k] = sv
		}
		sm, ok1 := sv.(map[string]any)
		rm, ok2 := rv.(map[string]any)
		if ok1 && ok2 {
			restoreCase(sm, rm)
		}
	}
}

// finish applies what depends on where the file is and on names: ~ and
// relative workspace and sessions paths, and the kind implied by a provider's name.
func finish(cfg *Config, configDir string) {
	cfg.Agents.Workspace = resolvePath(cfg.Agents.Workspace, configDir)
	cfg.Agents.SessionsDir = resolvePath(cfg.Agents.SessionsDir, configDir)
	cfg.Usage.Dir = resolvePath(cfg.Usage.Dir, configDir)
	for i := range cfg.Tools.Exec.Expose {
		x := &cfg.Tools.Exec.Expose[i]
		x.Path = resolvePath(x.Path, configDir)
	}
	for name, p := range cfg.Providers {
		if p.Kind == "" && impliedKind(name) != "" {
			p.Kind = impliedKind(name)
		}
		if p.Kind == "gemini" && p.BaseURL == "" {
			p.BaseURL = GeminiBaseURL
		}
		cfg.Providers[name] = p
	}
}

// resolvePath expands a leading ~ and makes a relative path relative to the
// config file's directory, so the daemon does not depend on its working
// directory (systemd starts it in /).
func resolvePath(p, base string) string {
	if p == "" {
		return p
	}
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			p = filepath.Join(home, p[1:])
		}
	}
	if !filepath.IsAbs(p) && !strings.HasPrefix(p, "~") {
		p = filepath.Join(base, p)
	}
	return filepath.Clean(p)
}
