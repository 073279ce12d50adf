package matrix

import (
	"context"
	"encoding/json"
)

// Check logs in if it must and calls /whoami once, for `nanobot doctor`.
// It returns the bot's user id, or an error wrapping
// channels.ErrTokenRefused when the homeserver refused the token.
func (c *Channel) Check(ctx context.Context) (string, error) {
	if err := c.authenticate(ctx); err != nil {
		return "", err
	}
	return c.bot.String(), nil
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
