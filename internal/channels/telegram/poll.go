package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// poll long-polls getUpdates until ctx ends. Each batch is journaled, and
// fsync'd while its turns start, before the next call confirms it to
// Telegram (an offset past an update deletes it there), so a crash between
// the two never loses it. A call that outlives
// poll_timeout plus the stall grace is abandoned and polling restarts on a
// fresh connection: that is the stall watchdog.
//
// The first call, and the first after a failure, is a short poll (timeout
// 0): it answers at once, so the channel reports ready as soon as Telegram
// accepts polling instead of when the first long poll ends, which on a quiet
// bot is poll_timeout later (and /readyz, Docker's health and orchestrators
// would wait that long for nothing). While a long poll is pending the
// channel stays ready; a failure or a stall makes it not ready.
func (c *Channel) poll(ctx context.Context, replay []json.RawMessage) {
	if err := c.deleteWebhook(ctx); err != nil {
		if ctx.Err() != nil {
			return
		}
		c.log.Warn("deleteWebhook failed; getUpdates will report a conflict if a webhook is still set", zap.Error(err))
	}
	offset := c.journal.nextOffset()
	var backoff time.Duration
	answered := false // the last getUpdates succeeded
	for ctx.Err() == nil {
		if backoff > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
		}
		timeout := c.cfg.PollTimeout
		if !answered {
			timeout = 0
		}
		cctx, cancel := context.WithTimeout(ctx, timeout+c.cfg.StallGrace)
		raw, err := c.getUpdates(cctx, offset, timeout)
		stalled := errors.Is(cctx.Err(), context.DeadlineExceeded)
		cancel()
		if replay != nil && (err != nil || len(raw) == 0) {
			// Nothing came with the replayed updates: they go alone.
			c.acceptBacklog(ctx, replay)
			replay = nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			answered = false
			backoff = c.pollFailed(err, stalled, backoff)
			continue
		}
		answered, backoff = true, 0
		c.setHealth(nil)
		if len(raw) == 0 {
			continue
		}
		fresh, syncJournal, err := c.journal.received(raw, true)
		if err != nil {
			// Without the journal, confirming these would risk losing
			// them: poll the same offset again after a pause.
			c.log.Error("update journal not written; not confirming the batch", zap.Error(err))
			backoff = 5 * time.Second
			continue
		}
		// The turns start while the batch is fsync'd; only a durable batch
		// is confirmed, by the next getUpdates' offset.
		if replay != nil {
			c.acceptBacklog(ctx, append(replay, fresh...))
			replay = nil
		} else {
			for _, u := range fresh {
				c.accept(ctx, u)
			}
		}
		if err := syncJournal(); err != nil {
			// Telegram redelivers the batch; the journal recognises it
			// and rewrites the file before confirming it.
			c.log.Error("update journal not synced; not confirming the batch", zap.Error(err))
			backoff = 5 * time.Second
			continue
		}
		offset = max(offset, peekID(raw[len(raw)-1])+1)
	}
}

// pollFailed logs a failed getUpdates, records health, and returns the wait
// before the next try.
func (c *Channel) pollFailed(err error, stalled bool, prev time.Duration) time.Duration {
	var ae *apiErr
	switch {
	case stalled:
		n := c.stalls.Add(1)
		c.setHealth(fmt.Errorf("telegram: getUpdates stalled"))
		c.log.Warn("getUpdates stalled; restarting polling on a new connection", zap.Int64("stalls", n))
		c.http.CloseIdleConnections()
		return 0
	case errors.As(err, &ae) && ae.Code == 409:
		err = fmt.Errorf("telegram: another process is receiving this bot's updates (a second nanobot, or a webhook) — "+
			"only one may poll per token: %s", ae.Description)
		c.setHealth(err)
		c.log.Error("getUpdates conflict", zap.Error(err))
		return min(max(2*prev, 5*time.Second), time.Minute)
	case errors.As(err, &ae) && ae.Code == 429:
		c.log.Warn("getUpdates rate limited", zap.Int("retry_after", ae.RetryAfter))
		return max(time.Duration(ae.RetryAfter)*time.Second, time.Second)
	case errors.As(err, &ae) && (ae.Code == 401 || ae.Code == 404):
		err = fmt.Errorf("telegram: the bot token was refused: %s", ae.Description)
		c.setHealth(err)
		c.log.Error("getUpdates refused", zap.Error(err))
		return time.Minute
	}
	c.setHealth(err)
	c.log.Warn("getUpdates failed; retrying", zap.Error(err))
	return min(max(2*prev, 500*time.Millisecond), 30*time.Second)
}

func (c *Channel) deleteWebhook(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, c.deps.CallTimeout)
	defer cancel()
	_, err := c.api.DeleteWebhook(cctx, nil)
	if err != nil {
		return fmt.Errorf("telegram deleteWebhook: %s", c.scrub(err.Error()))
	}
	return nil
}

// Stalls reports how many times the watchdog restarted polling.
func (c *Channel) Stalls() int64 { return c.stalls.Load() }
