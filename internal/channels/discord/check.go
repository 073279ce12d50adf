package discord

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/nanobot-go/nanobot/internal/channels"
)

// Check calls GET /users/@me once, through the same REST transport
// (api_url) Run uses, for `nanobot doctor`. It returns the bot's user name,
// or an error wrapping channels.ErrTokenRefused when Discord refused the
// token.
func (c *Channel) Check(ctx context.Context) (string, error) {
	u, err := c.sess.User("@me", discordgo.WithContext(ctx))
	var rest *discordgo.RESTError
	switch {
	case err == nil:
		return u.Username, nil
	case errors.As(err, &rest) && rest.Response != nil && rest.Response.StatusCode == http.StatusUnauthorized:
		return "", fmt.Errorf("discord users/@me: %w: %s", channels.ErrTokenRefused, c.scrub(err.Error()))
	}
	return "", fmt.Errorf("discord users/@me: %s", c.scrub(err.Error()))
}

func (c *Channel) scrub(s string) string { return strings.ReplaceAll(s, c.token, "<token>") }
