package natsbus

import (
	"context"
	"errors"
	"time"
)

// Retry runs try until it succeeds or ctx ends, pausing wait after each
// failure: NATS may not be up yet (the daemon may start first), or may be
// restarting. Only the first failure is passed to warn, so an outage costs
// one log line, and not one that came of ctx ending. When ctx ends it
// returns try's last error joined with ctx's.
func Retry(ctx context.Context, wait time.Duration, warn func(error), try func() error) error {
	logged := false
	for {
		err := try()
		if err == nil {
			return nil
		}
		if !logged && ctx.Err() == nil {
			warn(err)
			logged = true
		}
		if sleep(ctx, wait) != nil {
			return errors.Join(err, ctx.Err())
		}
	}
}
