package daemon

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/nanobot-go/nanobot/internal/bus/natsbus"
	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/channels/kinds"
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
	cron := g.newCron()
	if err := g.core.Tools.Register(cron.Tool(g.runsChannel)); err != nil {
		return fmt.Errorf("register tool cron: %w", err)
	}
	g.schedulers = append(g.schedulers, cron)
	g.cron = cron
	if hb := g.cfg.Gateway.Heartbeat; hb.Enabled {
		g.schedulers = append(g.schedulers, schedule.NewHeartbeat(schedule.HeartbeatConfig{
			Interval:  hb.Interval,
			StatePath: filepath.Join(g.opts.DataDir, HeartbeatStateFile),
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

// State files of the schedule, in the data dir: what decides who gets a
// message must not be where a command can write it
// (docs/schedule.md#where-jobs-live). With NATS the agent processes share
// the data dir's cron/ (docs/scale-out.md).
const (
	CronJobsFile       = "cron/jobs.json"
	HeartbeatStateFile = "heartbeat/state.json"
)

// newCron returns the jobs of the data dir. With NATS, other processes
// change the jobs file too (a worker's cron tool, the control panel of the
// channels process), so the scheduler looks at it as often as the leader
// renews its lease.
func (g *Gateway) newCron() *schedule.Cron {
	cfg := schedule.CronConfig{Path: filepath.Join(g.opts.DataDir, CronJobsFile)}
	if g.core.NATS != nil {
		cfg.Watch = g.cfg.Bus.NATS.LeaseTTL / 3
	}
	return schedule.NewCron(cfg, schedule.CronDeps{Bus: g.core.Pub}, g.log.Named("cron"))
}

// migrateJobs moves the jobs of an old <workspace>/cron/jobs.json into the
// data dir, once, each checked as the cron tool checks a new one
// (schedule.Cron.Migrate, with jobChat for the chat).
func (g *Gateway) migrateJobs() error {
	if g.cron == nil || !g.runs(RoleAgent) {
		return nil
	}
	_, err := g.cron.Migrate(g.core.files, g.jobChat)
	return err
}

// jobChat checks the chat of a job that did not come through the cron
// tool, as if a turn of that chat had asked for it: the channel takes runs
// here, the sender is let in by the channel's access policy (as intake
// would let their message in), and the session key is that chat's. The
// routing metadata (topic, thread) is taken from the session key, not from
// the file.
func (g *Gateway) jobChat(c schedule.Chat) (schedule.Chat, error) {
	if !g.runsChannel(c.Channel) {
		return c, fmt.Errorf("channel %q takes no runs here", c.Channel)
	}
	t, ok := g.chatOfSession(c.Key())
	if !ok || t.Channel != c.Channel || t.ChatID != c.ChatID {
		return c, fmt.Errorf("session key %q is not the session of chat %s:%s", c.Key(), c.Channel, c.ChatID)
	}
	if err := g.senderAllowed(c.Channel, c.SenderID); err != nil {
		return c, err
	}
	meta := maps.Clone(c.Metadata)
	if k, ok := kinds.ByName(c.Channel); ok {
		for _, key := range k.ThreadMeta {
			delete(meta, key)
		}
	}
	if meta == nil && len(t.Metadata) > 0 {
		meta = map[string]string{}
	}
	maps.Copy(meta, t.Metadata)
	c.SessionKey, c.Metadata = t.SessionKey, meta
	return c, nil
}

// senderAllowed applies the channel's access policy to a job's sender. The
// web page has no senders: whoever holds its token owns its conversations.
func (g *Gateway) senderAllowed(channel, sender string) error {
	if channel == web.Channel {
		return nil
	}
	k, ok := kinds.ByName(channel)
	if !ok {
		return fmt.Errorf("channel %q has no access policy to check", channel)
	}
	acc := k.Access(g.cfg)
	pairing := g.pairing
	if pairing == nil { // an agent worker: the channels process holds the store
		pairing = channels.NewPairingStore(filepath.Join(g.opts.DataDir, PairingFile))
	}
	a, err := channels.NewAccess(channel, acc, pairing)
	if err != nil {
		return err
	}
	allowed, err := a.Allowed(channels.Sender{ID: sender})
	switch {
	case err != nil:
		return fmt.Errorf("access of sender %q: %w", sender, err)
	case !allowed || sender == "":
		return fmt.Errorf("sender %q is not let in by channels.%s's access policy", sender, channel)
	}
	return nil
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
		if name == web.Channel {
			return g.cfg.Channels.Web.Enabled
		}
		k, ok := kinds.ByName(name)
		return ok && k.Enabled(g.cfg)
	}
	if name == web.Channel {
		return g.web != nil // the page's conversations take reminders too
	}
	return slices.ContainsFunc(g.channels, func(c *channelRun) bool { return c.name == name })
}

// chatOfSession turns a session key into the chat the heartbeat delivers
// to, for the channels running here: each row of the channel table reads
// its own keys back (channels.Kind.Target), and the web page's are
// "web:<conversation>". Other keys (the terminal, system sessions) are
// never targets.
func (g *Gateway) chatOfSession(key string) (schedule.Target, bool) {
	if k, chat, ok := kinds.Target(key); ok {
		if !g.runsChannel(k.Name) {
			return schedule.Target{}, false
		}
		return schedule.Target{Channel: k.Name, ChatID: chat.ID, SessionKey: key, Metadata: chat.Metadata}, true
	}
	id, ok := strings.CutPrefix(key, web.Channel+":")
	if !ok || id == "" || strings.Contains(id, ":") || !g.runsChannel(web.Channel) {
		return schedule.Target{}, false
	}
	return schedule.Target{Channel: web.Channel, ChatID: id, SessionKey: key}, true
}
