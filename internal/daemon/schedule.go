package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/nanobot-go/nanobot/internal/bus/natsbus"
	"github.com/nanobot-go/nanobot/internal/channels/discord"
	"github.com/nanobot-go/nanobot/internal/channels/telegram"
	"github.com/nanobot-go/nanobot/internal/schedule"
	"github.com/nanobot-go/nanobot/internal/web"
)

// scheduler is a producer of inbound work that runs beside the channels.
type scheduler interface {
	Run(ctx context.Context) error
}

// buildSchedule creates the cron scheduler (and offers its tool to the
// model) and, when enabled, the heartbeat (docs/schedule.md). They only exist
// in the gateway: a job's run needs a daemon that is up when it is due and a
// chat app to reach. With NATS every agent process builds them, and the one
// holding the scheduler lease runs them (docs/scale-out.md).
func (g *Gateway) buildSchedule() error {
	ws := g.cfg.Agents.Workspace
	cron := g.newCron()
	if err := g.core.Tools.Register(cron.Tool(g.runsChannel)); err != nil {
		return fmt.Errorf("register tool cron: %w", err)
	}
	g.schedulers = append(g.schedulers, cron)
	g.cron = cron
	if hb := g.cfg.Gateway.Heartbeat; hb.Enabled {
		g.schedulers = append(g.schedulers, schedule.NewHeartbeat(schedule.HeartbeatConfig{
			Interval:  hb.Interval,
			StatePath: filepath.Join(ws, "heartbeat", "state.json"),
		}, schedule.HeartbeatDeps{
			Workspace: g.core.files, Model: g.core.Router, Bus: g.core.Pub, Sessions: g.core.Sessions, Target: g.chatOfSession,
		}, g.log.Named("heartbeat")))
	}
	if g.core.NATS != nil {
		g.lease = g.core.NATS.Lease(natsbus.SchedulerLease, g.cfg.Bus.NATS.LeaseTTL)
		g.core.Metrics.WatchLeader(g.lease.Leading)
	}
	return nil
}

// newCron returns the jobs of the shared workspace. With NATS, other
// processes change the jobs file too (a worker's cron tool, the control
// panel of the channels process), so the scheduler looks at it as often as
// the leader renews its lease.
func (g *Gateway) newCron() *schedule.Cron {
	cfg := schedule.CronConfig{Path: filepath.Join(g.cfg.Agents.Workspace, "cron", "jobs.json")}
	if g.core.NATS != nil {
		cfg.Watch = g.cfg.Bus.NATS.LeaseTTL / 3
	}
	return schedule.NewCron(cfg, schedule.CronDeps{Bus: g.core.Pub}, g.log.Named("cron"))
}

// runSchedule starts the schedulers with the channels: they stop taking
// part when intake stops, before the bus's inbound side closes. With a
// lease they run only while this process holds it. A scheduler that fails
// (an unreadable jobs file) stops the daemon like a channel does.
func (g *Gateway) runSchedule(ctx context.Context, intake *sync.WaitGroup, stop context.CancelCauseFunc) {
	if len(g.schedulers) == 0 {
		return
	}
	intake.Go(func() {
		var err error
		if g.lease != nil {
			err = g.lease.Run(ctx, g.runSchedulers)
		} else {
			err = g.runSchedulers(ctx)
		}
		if err != nil {
			g.log.Error("scheduler stopped", zap.Error(err))
			stop(err)
		}
	})
}

// runSchedulers runs every scheduler until ctx ends or one fails.
func (g *Gateway) runSchedulers(ctx context.Context) error {
	eg, ctx := errgroup.WithContext(ctx)
	for _, s := range g.schedulers {
		eg.Go(func() error { return s.Run(ctx) })
	}
	return eg.Wait()
}

// runsChannel reports whether a chat of this channel can receive job runs:
// the channel is running in this gateway or, in an agent worker, in the
// channels process, which serves what the configuration enables.
func (g *Gateway) runsChannel(name string) bool {
	if !g.runs(RoleChannels) {
		ch := g.cfg.Channels
		switch name {
		case telegram.Name:
			return ch.Telegram.Enabled
		case discord.Name:
			return ch.Discord.Enabled
		case web.Channel:
			return ch.Web.Enabled
		}
		return false
	}
	if name == web.Channel {
		return g.web != nil // the page's conversations take reminders too
	}
	return slices.ContainsFunc(g.channels, func(c *channelRun) bool { return c.name == name })
}

// chatOfSession turns a session key into the chat the heartbeat delivers
// to, for the channels running here: "telegram:<chat>" and
// "telegram:<chat>:topic:<thread>" (forum topics), "discord:<channel>" and
// "discord:<parent>:thread:<thread>". Other keys (the terminal, system
// sessions) are never targets.
func (g *Gateway) chatOfSession(key string) (schedule.Target, bool) {
	parts := strings.Split(key, ":")
	if len(parts) < 2 || !g.runsChannel(parts[0]) || parts[1] == "" {
		return schedule.Target{}, false
	}
	t := schedule.Target{Channel: parts[0], ChatID: parts[1], SessionKey: key}
	switch {
	case len(parts) == 2:
		return t, true
	case len(parts) == 4 && parts[0] == "telegram" && parts[2] == "topic":
		t.Metadata = map[string]string{telegram.MetaThreadID: parts[3]}
		return t, true
	case len(parts) == 4 && parts[0] == "discord" && parts[2] == "thread":
		// A Discord thread is a channel of its own; replies go to it.
		t.ChatID = parts[3]
		t.Metadata = map[string]string{"thread_id": parts[3], "parent_id": parts[1]}
		return t, true
	}
	return schedule.Target{}, false
}
