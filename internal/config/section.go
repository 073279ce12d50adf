package config

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// ChannelSection is what the loader knows of one chat channel's section,
// channels.<Name>. The struct is the channel's own (telegram.Config, in its
// adapter's folder); this package names no channel. The channel table
// (internal/channels/kinds) hands the sections to Load and Defaults.
//
// A section's keys behave like any other: they have defaults, NANOBOT_*
// environment overrides (NANOBOT_CHANNELS_TELEGRAM_TOKEN), ${VAR}
// references, strict decoding with the closest key suggested for a typo,
// and secrets marked with the secret tag (secrets.go).
type ChannelSection struct {
	// Name is the key under channels.
	Name string
	// Type is the section's struct (not a pointer); its mapstructure tags
	// name the keys, like the rest of Config.
	Type reflect.Type
	// Defaults maps every key of the section (relative: "token") to its
	// default, the one source of them (TestDefaultsAgreeWithExampleAndDocs).
	Defaults map[string]any
	// TokenKey is the key of the credential without which the channel
	// cannot start ("token"): when its ${VAR} is unset the channel is down
	// with that reason (ChannelProblem) instead of failing validation.
	TokenKey string
	// Validate checks the decoded section (a pointer to Type); unset says
	// that the credential's variable is unset (see TokenKey). Each problem
	// names its full key (channels.<Name>.<key>).
	Validate func(section any, unset bool, p *Problems)
}

// NewSection returns a section's struct (a pointer to its Type) holding its
// defaults: what an empty channels.<Name> yields.
func NewSection(s ChannelSection) (any, error) {
	settings := map[string]any{}
	for k, v := range s.Defaults {
		settings[k] = v
	}
	out, errs := decodeSection(s, settings, lineIndex{})
	if len(errs) > 0 {
		return nil, fmt.Errorf("channels.%s defaults: %v", s.Name, errs)
	}
	return out, nil
}

// Section returns channels.<name> of c as the channel's struct T, adding
// it with its defaults when c has none (a config built by Defaults()
// without sections, in a test). It is how an adapter's Kind reads its own
// section; nothing else needs the type. Adding writes c: a config shared
// between goroutines has its sections added first (Load does; the gateway
// adds any missing before it starts).
func Section[T any](c *Config, s ChannelSection) *T {
	if v, ok := c.Channels.Kinds[s.Name].(*T); ok {
		return v
	}
	v, err := NewSection(s)
	if err != nil {
		// The defaults are a constant of the adapter; its tests decode them.
		panic(err)
	}
	c.Channels.add(s, v)
	return v.(*T)
}

// add puts section s with its value v (a pointer to s.Type) in c.
func (c *ChannelsConfig) add(s ChannelSection, v any) {
	if c.Kinds == nil {
		c.Kinds = map[string]any{}
	}
	c.Kinds[s.Name] = v
	if !slices.ContainsFunc(c.sections, func(o ChannelSection) bool { return o.Name == s.Name }) {
		c.sections = append(slices.Clip(c.sections), s)
	}
}

// section returns the section named name and its value, found false when c
// has none of that name.
func (c *ChannelsConfig) section(name string) (ChannelSection, reflect.Value, bool) {
	i := slices.IndexFunc(c.sections, func(s ChannelSection) bool { return s.Name == name })
	v, ok := c.Kinds[name]
	if i < 0 || !ok {
		return ChannelSection{}, reflect.Value{}, false
	}
	return c.sections[i], reflect.ValueOf(v).Elem(), true
}

// validateSections runs each section's own checks.
func (c *Config) validateSections(p *Problems) {
	for _, s := range c.Channels.sections {
		if v, ok := c.Channels.Kinds[s.Name]; ok && s.Validate != nil {
			s.Validate(v, c.ChannelProblem(s.Name) != "", p)
		}
	}
}

// sectionField returns the string at key of a section struct v ("" when there is
// none), squashed parts included.
func sectionField(v reflect.Value, key string) string {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
		switch {
		case opts == "squash" && f.Type.Kind() == reflect.Struct:
			if s := sectionField(v.Field(i), key); s != "" {
				return s
			}
		case name == key && f.Type.Kind() == reflect.String:
			return v.Field(i).String()
		}
	}
	return ""
}

// decodeSection decodes the settings of channels.<s.Name> into a new
// pointer to s.Type, reporting wrong types with their full key.
func decodeSection(s ChannelSection, settings map[string]any, lines lineIndex) (any, []error) {
	holder := reflect.New(reflect.MapOf(reflect.TypeFor[string](), s.Type))
	if err := decodeInto(map[string]any{s.Name: settings}, holder.Interface()); err != nil {
		errs := decodeProblems(err, lines)
		for i, e := range errs {
			errs[i] = fmt.Errorf("channels%w", e)
		}
		return nil, errs
	}
	v := reflect.New(s.Type)
	v.Elem().Set(holder.Elem().MapIndex(reflect.ValueOf(s.Name)))
	return v.Interface(), nil
}

// sectionNames lists the names of sections, sorted.
func sectionNames(sections []ChannelSection) []string {
	names := make([]string, 0, len(sections))
	for _, s := range sections {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	return names
}

// sectionKeys are the keys the channels mapping knows: its own fields and
// one per section.
func sectionKeys(sections []ChannelSection) map[string]reflect.Type {
	keys := structKeys(reflect.TypeFor[ChannelsConfig]())
	for _, s := range sections {
		keys[s.Name] = s.Type
	}
	return keys
}

// splitSections takes the sections' settings out of settings["channels"],
// so that Config's own decoding does not see them.
func splitSections(settings map[string]any, sections []ChannelSection) (map[string]map[string]any, []error) {
	out := map[string]map[string]any{}
	ch, ok := settings["channels"].(map[string]any)
	if !ok {
		return out, nil
	}
	ch = maps.Clone(ch)
	settings["channels"] = ch
	var errs []error
	for _, s := range sections {
		raw, present := ch[s.Name]
		m, isMap := raw.(map[string]any)
		if present && !isMap {
			errs = append(errs, fmt.Errorf("channels.%s: %w", s.Name, mismatch("a mapping (key: value)", raw)))
		}
		if m == nil {
			m = map[string]any{}
		}
		out[s.Name] = m
		delete(ch, s.Name)
	}
	return out, errs
}

// WithChannelToken returns a copy of c whose channels.<name> has token as
// its credential and policy open, for a one-off check of a pasted token
// (who may talk to the bot does not matter there, and an empty allowlist
// not set up yet must not stop it). c and its section are not changed;
// false when c has no such section.
func (c *Config) WithChannelToken(name, token string) (*Config, bool) {
	return c.withCredential(name, token, true)
}

// WithChannelCredential returns a copy of c whose channels.<name> has token
// as its credential and is otherwise the same, access policy included: the
// config a running channel is rebuilt from when a token is pasted in the
// setup view. c is not changed; false when c has no such section.
func (c *Config) WithChannelCredential(name, token string) (*Config, bool) {
	return c.withCredential(name, token, false)
}

func (c *Config) withCredential(name, token string, open bool) (*Config, bool) {
	s, v, ok := c.Channels.section(name)
	if !ok || s.TokenKey == "" {
		return nil, false
	}
	cp := reflect.New(v.Type())
	cp.Elem().Set(v)
	setField(cp.Elem(), s.TokenKey, token)
	if open {
		setField(cp.Elem(), "policy", "open")
	}
	out := *c
	out.Channels.Kinds = maps.Clone(c.Channels.Kinds)
	out.Channels.Kinds[name] = cp.Interface()
	return &out, true
}

// setField sets the string at key of a section struct v, squashed parts
// included.
func setField(v reflect.Value, key, val string) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
		switch {
		case opts == "squash" && f.Type.Kind() == reflect.Struct:
			setField(v.Field(i), key, val)
		case name == key && f.Type.Kind() == reflect.String:
			v.Field(i).SetString(val)
		}
	}
}
