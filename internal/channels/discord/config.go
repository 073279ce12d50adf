package discord

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/nanobot-go/nanobot/internal/config"
)

// Config is channels.discord (docs/discord.md, docs/configuration.md). Its
// defaults are Section.Defaults; secrets carry the secret tag.
type Config struct {
	Enabled             bool   `mapstructure:"enabled"`
	Token               string `mapstructure:"token" secret:"true"`
	APIURL              string `mapstructure:"api_url" secret:"url"`
	config.Access       `mapstructure:",squash"`
	config.OutputConfig `mapstructure:",squash"`
	// AllowGuilds and AllowChannels restrict where the bot answers in guilds
	// (empty: anywhere it is allowed by user).
	AllowGuilds   []string `mapstructure:"allow_guilds"`
	AllowChannels []string `mapstructure:"allow_channels"`
	AllowRoles    []string `mapstructure:"allow_roles"`
	MaxMediaBytes int64    `mapstructure:"max_media_bytes"`
	// CatchUp is how far back messages posted while the bot was away (down,
	// or reconnecting without a resume) are fetched and answered, in the
	// chats it answers in; 0 turns that off.
	CatchUp time.Duration `mapstructure:"catch_up"`
}

// Section is channels.discord for the config loader.
var Section = config.ChannelSection{
	Name:     Name,
	Type:     reflect.TypeFor[Config](),
	TokenKey: "token",
	Defaults: map[string]any{
		"enabled":         false,
		"token":           "",
		"api_url":         "https://discord.com",
		"policy":          "allowlist",
		"allow_from":      []string{},
		"group_policy":    "mention",
		"rate_per_minute": 30,
		"streaming":       true,
		"tool_hints":      true,
		"edit_interval":   "1s",
		"typing_delay":    "500ms",
		"allow_guilds":    []string{},
		"allow_channels":  []string{},
		"allow_roles":     []string{},
		"max_media_bytes": 25 << 20,
		"catch_up":        "24h",
	},
	Validate: func(section any, unset bool, p *config.Problems) { section.(*Config).validate(unset, p) },
}

// Of returns cfg's channels.discord, at its defaults when cfg has none.
func Of(cfg *config.Config) *Config { return config.Section[Config](cfg, Section) }

// Defaults is channels.discord at its defaults.
func Defaults() Config {
	var cfg config.Config
	return *Of(&cfg)
}

var tokenShape = regexp.MustCompile(`^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$`)

// ValidToken reports whether s (with or without "Bot ") has the shape of a
// Discord bot token; whether Discord accepts it only users/@me tells.
func ValidToken(s string) bool {
	s = strings.TrimPrefix(strings.TrimSpace(s), "Bot ")
	return len(s) <= 256 && tokenShape.MatchString(s)
}

// validate checks the section; unset says that the token's variable is
// unset, which is no configuration error (config.ChannelProblem).
func (d *Config) validate(unset bool, p *config.Problems) {
	const key = "channels." + Name
	switch {
	case d.Enabled && d.Token == "" && !unset:
		p.Add(key+".token", "must be set when the channel is enabled (the bot token from the Discord developer portal; write token: ${DISCORD_BOT_TOKEN})")
	case d.Token != "" && !ValidToken(d.Token):
		p.Add(key+".token", "is not a Discord bot token: it is three dot-separated parts, such as MTIz….GhIj….kLmN… (Bot, on the developer portal: Reset Token, then copy it whole)")
	}
	p.HTTPURL(key+".api_url", d.APIURL, false)
	p.Access(Name, &d.Access, d.Enabled, "the bot answers /whoami with it, or copy it with Developer Mode on")
	p.Output(Name, &d.OutputConfig)
	for _, list := range []struct {
		name string
		ids  []string
	}{{"allow_guilds", d.AllowGuilds}, {"allow_channels", d.AllowChannels}, {"allow_roles", d.AllowRoles}} {
		for i, id := range list.ids {
			if strings.TrimSpace(id) == "" {
				p.Add(fmt.Sprintf("%s.%s[%d]", key, list.name, i), "must not be empty (write an id)")
			}
		}
	}
	p.AtLeast(key+".max_media_bytes", d.MaxMediaBytes, 1)
	if d.CatchUp < 0 {
		p.Add(key+".catch_up", "must not be negative (0 turns catching up off; e.g. 24h)")
	}
}
