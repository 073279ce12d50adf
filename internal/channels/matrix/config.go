package matrix

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/nanobot-go/nanobot/internal/config"
)

// Config is the channels.matrix section (docs/matrix.md). The keys enabled,
// homeserver, user_id, access_token, password, device_id, policy,
// allow_from and group_policy are a contract; the rest may grow.
type Config struct {
	Enabled bool `mapstructure:"enabled"`
	// Homeserver is the client-server API's base URL (https://matrix.example.org).
	Homeserver string `mapstructure:"homeserver"`
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

// Defaults are the section's values before the config file: what
// config.example.yaml shows.
func Defaults() Config {
	return Config{
		Access: config.Access{Policy: "allowlist", AllowFrom: []string{}, GroupPolicy: "mention", RatePerMinute: 30},
		OutputConfig: config.OutputConfig{Streaming: true, ToolHints: true, EditInterval: time.Second,
			TypingDelay: 500 * time.Millisecond},
		MaxMediaBytes: 20 << 20,
	}
}

// Validate names the key that is wrong, for a section that is enabled.
func (c Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	u, err := url.Parse(c.Homeserver)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("channels.matrix.homeserver: %q is not an http(s) URL", c.Homeserver)
	}
	if !validUserID(c.UserID) {
		return fmt.Errorf("channels.matrix.user_id: %q is not a Matrix user id (@name:server)", c.UserID)
	}
	if strings.TrimSpace(c.AccessToken) == "" && c.Password == "" {
		return fmt.Errorf("channels.matrix.access_token: set it, or channels.matrix.password to log in")
	}
	if c.MaxMediaBytes <= 0 {
		return fmt.Errorf("channels.matrix.max_media_bytes: must be positive")
	}
	return nil
}

func validUserID(s string) bool {
	local, server, ok := strings.Cut(strings.TrimPrefix(s, "@"), ":")
	return strings.HasPrefix(s, "@") && ok && local != "" && server != ""
}
