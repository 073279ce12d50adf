package matrix

import (
	"reflect"
	"strings"

	"github.com/nanobot-go/nanobot/internal/config"
)

// Config is channels.matrix (docs/matrix.md, docs/configuration.md). The
// keys enabled, homeserver, user_id, access_token, password, device_id,
// policy, allow_from and group_policy are a contract; the rest may grow.
// Its defaults are Section.Defaults; secrets carry the secret tag.
type Config struct {
	Enabled bool `mapstructure:"enabled"`
	// Homeserver is the client-server API's base URL (https://matrix.example.org).
	Homeserver string `mapstructure:"homeserver" secret:"url"`
	// UserID is the bot's full Matrix id (@nanobot:example.org).
	UserID string `mapstructure:"user_id"`
	// AccessToken is a token of the bot's account; or
	AccessToken string `mapstructure:"access_token" secret:"true"`
	// Password logs in once; the token it gets is kept in the data dir
	// (LoginFile, 0600) and reused until the server refuses it.
	Password string `mapstructure:"password" secret:"true"`
	// DeviceID names the bot's device: the one the token belongs to, or the
	// one a password login asks for (empty: the server picks one).
	DeviceID            string `mapstructure:"device_id"`
	config.Access       `mapstructure:",squash"`
	config.OutputConfig `mapstructure:",squash"`
	// MaxMediaBytes caps a downloaded image, voice message or file.
	MaxMediaBytes int64 `mapstructure:"max_media_bytes"`
}

// Section is channels.matrix for the config loader.
var Section = config.ChannelSection{
	Name:     Name,
	Type:     reflect.TypeFor[Config](),
	TokenKey: "access_token",
	Defaults: map[string]any{
		"enabled":         false,
		"homeserver":      "",
		"user_id":         "",
		"access_token":    "",
		"password":        "",
		"device_id":       "",
		"policy":          "allowlist",
		"allow_from":      []string{},
		"group_policy":    "mention",
		"rate_per_minute": 30,
		"streaming":       true,
		"tool_hints":      true,
		"edit_interval":   "1s",
		"typing_delay":    "500ms",
		"max_media_bytes": 20 << 20,
	},
	Validate: func(section any, unset bool, p *config.Problems) { section.(*Config).validate(unset, p) },
}

// Of returns cfg's channels.matrix, at its defaults when cfg has none.
func Of(cfg *config.Config) *Config { return config.Section[Config](cfg, Section) }

// Defaults is channels.matrix at its defaults.
func Defaults() Config {
	var cfg config.Config
	return *Of(&cfg)
}

// validate checks the section; unset says that access_token's variable is
// unset, which is no configuration error (config.ChannelProblem).
func (c *Config) validate(unset bool, p *config.Problems) {
	const key = "channels." + Name
	if c.Enabled || c.Homeserver != "" {
		p.HTTPURL(key+".homeserver", c.Homeserver, false)
	}
	if (c.Enabled || c.UserID != "") && !validUserID(c.UserID) {
		p.Add(key+".user_id", "must be the bot's full Matrix id, such as @nanobot:example.org, got %q", c.UserID)
	}
	if c.Enabled && strings.TrimSpace(c.AccessToken) == "" && c.Password == "" && !unset {
		p.Add(key+".access_token", "must be set when the channel is enabled, or channels.matrix.password to log in (docs/matrix.md: creating the bot account)")
	}
	p.Access(Name, &c.Access, c.Enabled, "the bot answers /whoami with it; it is your full Matrix id, such as @you:example.org")
	p.Output(Name, &c.OutputConfig)
	p.AtLeast(key+".max_media_bytes", c.MaxMediaBytes, 1)
}

func validUserID(s string) bool {
	local, server, ok := strings.Cut(strings.TrimPrefix(s, "@"), ":")
	return strings.HasPrefix(s, "@") && ok && local != "" && server != ""
}
