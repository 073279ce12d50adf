package telegram

import (
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"time"

	"github.com/nanobot-go/nanobot/internal/config"
)

// Config is channels.telegram (docs/telegram.md, docs/configuration.md).
// Its defaults are Section.Defaults; secrets carry the secret tag.
type Config struct {
	Enabled             bool   `mapstructure:"enabled"`
	Token               string `mapstructure:"token" secret:"true"`
	APIURL              string `mapstructure:"api_url" secret:"url"`
	config.Access       `mapstructure:",squash"`
	config.OutputConfig `mapstructure:",squash"`
	// Mode is "polling" (default) or "webhook".
	Mode string `mapstructure:"mode"`
	// WebhookURL is the public URL Telegram posts to (webhook mode).
	WebhookURL string `mapstructure:"webhook_url" secret:"url"`
	// WebhookSecret is checked against X-Telegram-Bot-Api-Secret-Token.
	WebhookSecret string `mapstructure:"webhook_secret" secret:"true"`
	// Proxy is an http(s) or socks5 URL for all Bot API traffic.
	Proxy string `mapstructure:"proxy" secret:"url"`
	// PollTimeout is getUpdates' long-poll timeout.
	PollTimeout time.Duration `mapstructure:"poll_timeout"`
	// StallGrace is how long past poll_timeout a getUpdates may take before
	// the watchdog abandons it and polls again on a new connection.
	StallGrace time.Duration `mapstructure:"stall_grace"`
	// MaxMediaBytes caps a downloaded photo or document.
	MaxMediaBytes int64 `mapstructure:"max_media_bytes"`
}

// Section is channels.telegram for the config loader.
var Section = config.ChannelSection{
	Name:     Name,
	Type:     reflect.TypeFor[Config](),
	TokenKey: "token",
	Defaults: map[string]any{
		"enabled":         false,
		"token":           "",
		"api_url":         "https://api.telegram.org",
		"policy":          "allowlist",
		"allow_from":      []string{},
		"group_policy":    "mention",
		"rate_per_minute": 30,
		"streaming":       true,
		"tool_hints":      true,
		"edit_interval":   "1s",
		"typing_delay":    "500ms",
		"mode":            "polling",
		"webhook_url":     "",
		"webhook_secret":  "",
		"proxy":           "",
		"poll_timeout":    "30s",
		"stall_grace":     "15s",
		"max_media_bytes": 20 << 20,
	},
	Validate: func(section any, unset bool, p *config.Problems) { section.(*Config).validate(unset, p) },
}

// Of returns cfg's channels.telegram, at its defaults when cfg has none.
func Of(cfg *config.Config) *Config { return config.Section[Config](cfg, Section) }

// Defaults is channels.telegram at its defaults.
func Defaults() Config {
	var cfg config.Config
	return *Of(&cfg)
}

var tokenShape = regexp.MustCompile(`^[0-9]+:[A-Za-z0-9_-]+$`)

// ValidToken reports whether s has the shape of a Telegram bot token
// (123456789:AAF…); whether Telegram accepts it only getMe tells.
func ValidToken(s string) bool { return len(s) <= 256 && tokenShape.MatchString(s) }

// secretShape is what Telegram accepts as a webhook secret_token: 1-256 of
// these characters. Here and below the length is checked apart from the
// pattern: a counted repetition such as {1,256} compiles into a program with
// an instruction per repeat, a quarter of a megabyte allocated at every start.
var secretShape = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func validSecret(s string) bool { return len(s) <= 256 && secretShape.MatchString(s) }

// validate checks the section; unset says that the token's variable is
// unset, which is no configuration error: the channel starts degraded
// (config.ChannelProblem). A token that cannot be a token is.
func (t *Config) validate(unset bool, p *config.Problems) {
	const key = "channels." + Name
	switch {
	case t.Enabled && t.Token == "" && !unset:
		p.Add(key+".token", "must be set when the channel is enabled (create a bot with @BotFather; write token: ${TELEGRAM_BOT_TOKEN})")
	case t.Token != "" && !ValidToken(t.Token):
		p.Add(key+".token", "is not a Telegram bot token: it is <bot id>:<secret>, such as 123456789:AAF… (copy it whole from @BotFather)")
	}
	p.HTTPURL(key+".api_url", t.APIURL, false)
	p.Access(Name, &t.Access, t.Enabled, "the bot answers /whoami with it")
	p.Output(Name, &t.OutputConfig)
	p.OneOf(key+".mode", t.Mode, "polling", "webhook")
	if t.Mode == "webhook" {
		t.validateWebhook(p)
	}
	if t.Proxy != "" {
		if err := config.CheckURL(t.Proxy, "http", "https", "socks5", "socks5h"); err != nil {
			p.Add(key+".proxy", "%v", err)
		}
	}
	if t.PollTimeout < time.Second {
		p.Add(key+".poll_timeout", "must be at least 1s (Telegram counts whole seconds), got %s", t.PollTimeout)
	}
	p.Positive(key+".stall_grace", t.StallGrace)
	p.AtLeast(key+".max_media_bytes", t.MaxMediaBytes, 1)
}

func (t *Config) validateWebhook(p *config.Problems) {
	const key = "channels." + Name
	switch u, err := url.Parse(t.WebhookURL); {
	case t.WebhookURL == "":
		p.Add(key+".webhook_url", "must be set when mode is webhook (the public https URL that reaches gateway.listen)")
	case err != nil || u.Scheme != "https" || u.Host == "":
		p.Add(key+".webhook_url", "must be an https URL with a host (Telegram only posts to https), got %q", t.WebhookURL)
	case u.Port() != "" && !slices.Contains([]string{"443", "80", "88", "8443"}, u.Port()):
		p.Add(key+".webhook_url", "port must be 443, 80, 88 or 8443 (the ports Telegram posts to), got %s", u.Port())
	}
	switch {
	case t.WebhookSecret == "":
		p.Add(key+".webhook_secret", "must be set when mode is webhook (1-256 characters A-Z a-z 0-9 _ -; e.g. from `openssl rand -hex 32`)")
	case !validSecret(t.WebhookSecret):
		p.Add(key+".webhook_secret", "may use only A-Z a-z 0-9 _ - and at most 256 characters (Telegram's rule; e.g. from `openssl rand -hex 32`)")
	}
}
