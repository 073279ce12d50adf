package telegram

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-telegram/bot"

	"github.com/nanobot-go/nanobot/internal/channels"
)

// Check calls getMe once, through the same client (api_url, proxy) Run
// uses, for `nanobot doctor`. It returns the bot's @username, or an error
// wrapping channels.ErrTokenRefused when Telegram refused the token.
func (c *Channel) Check(ctx context.Context) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, c.deps.CallTimeout)
	defer cancel()
	me, err := c.api.GetMe(cctx)
	switch {
	case err == nil:
		return "@" + me.Username, nil
	case errors.Is(err, bot.ErrorUnauthorized), errors.Is(err, bot.ErrorNotFound):
		return "", fmt.Errorf("telegram getMe: %w: %s", channels.ErrTokenRefused, c.scrub(err.Error()))
	}
	return "", fmt.Errorf("telegram getMe: %s", c.scrub(err.Error()))
}
