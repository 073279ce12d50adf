package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/channels/telegram"
	"github.com/nanobot-go/nanobot/internal/schedule"
	"github.com/nanobot-go/nanobot/internal/web"
)

// scheduler is a producer of inbound work that runs beside the channels.
type scheduler interface {
	Run(ctx context.Context) error
}

// buildSchedule creates the cron scheduler (and offers its tool to the
// model) and, when enabled, the heartbeat (S-R1, S-R2). They only exist in
// the gateway: a job's run needs a daemon that is up when it is due and a
// chat app to reach.
func (g *Gateway) buildSchedule() error {
	ws := g.cfg.Agents.Workspace
	cron := schedule.NewCron(schedule.CronConfig{Path: filepath.Join(ws, "cron", "jobs.json")},
		schedule.CronDeps{Bus: g.core.Pub}, g.log.Named("cron"))
	if err := g.core.Tools.Register(cron.Tool(g.runsChannel)); err != nil {
		return fmt.Errorf("register tool cron: %w", err)
	}
	g.schedulers = append(g.schedulers, cron)
	g.cron = cron
	if hb := g.cfg.Gateway.Heartbeat; hb.Enabled {
		g.schedulers = append(g.schedulers, schedule.NewHeartbeat(schedule.HeartbeatConfig{
			Interval:  hb.Interval,
			File:      filepath.Join(ws, "HEARTBEAT.md"),
			StatePath: filepath.Join(ws, "heartbeat", "state.json"),
		}, schedule.HeartbeatDeps{
			Model: g.core.Router, Bus: g.core.Pub, Sessions: g.core.Sessions, Target: g.chatOfSession,
		}, g.log.Named("heartbeat")))
	}
	return nil
}

// runSchedule starts the schedulers with the channels: they stop taking
// part when intake stops, before the bus's inbound side closes. A scheduler
// that fails (an unreadable jobs file) stops the daemon like a channel does.
func (g *Gateway) runSchedule(ctx context.Context, intake *sync.WaitGroup, stop context.CancelCauseFunc) {
	for _, s := range g.schedulers {
		intake.Go(func() {
			if err := s.Run(ctx); err != nil {
				g.log.Error("scheduler stopped", zap.Error(err))
				stop(err)
			}
		})
	}
}

// runsChannel reports whether a chat of this channel can receive job runs:
// the channel is running in this gateway.
func (g *Gateway) runsChannel(name string) bool {
	if name == web.Channel {
		return g.web != nil // the page's conversations take reminders too
	}
	return slices.ContainsFunc(g.channels, func(c channels.Channel) bool { return c.Name() == name })
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
