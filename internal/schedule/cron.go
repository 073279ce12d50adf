package schedule

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/filelock"
)

// Inbound is where due work goes: the bus's inbound side.
type Inbound interface {
	PublishInbound(ctx context.Context, m bus.InboundMessage) error
}

// Metadata this package sets on the inbound messages it publishes. Tools see
// it as tools.Origin.Metadata; the cron tool refuses to create jobs from a
// turn that carries it.
const (
	MetaSource      = "source"
	SourceCron      = "cron"
	SourceHeartbeat = "heartbeat"
	MetaJobID       = "cron_job_id"
)

// Scheduled reports whether metadata marks a turn started by a cron job or
// the heartbeat rather than by a person.
func Scheduled(meta map[string]string) bool {
	s := meta[MetaSource]
	return s == SourceCron || s == SourceHeartbeat
}

// CronConfig configures the cron scheduler. No config key carries these
// bounds (they protect the daemon from a model that schedules too much);
// zero takes the constant in brackets, and tests set their own.
type CronConfig struct {
	// Path is the jobs file: <data dir>/cron/jobs.json, outside the
	// workspace, where no command can forge it (Migrate moves an old one).
	Path string
	// MaxJobsPerChat bounds the jobs one chat may have
	// [DefaultMaxJobsPerChat].
	MaxJobsPerChat int
	// MinInterval is the shortest "every" allowed [DefaultMinInterval].
	MinInterval time.Duration
	// LateAfter: a run that starts more than this after its due time (the
	// daemon was down, the machine asleep) is flagged late
	// [DefaultLateAfter].
	LateAfter time.Duration
	// MaxMessage caps a job's instruction in characters
	// [DefaultMaxJobMessage].
	MaxMessage int
	// Watch, when positive, is how often Run looks whether another process
	// replaced the jobs file (an agent worker's cron tool, in split roles:
	// docs/scale-out.md), so a job added there is scheduled here. There is
	// no notification that crosses processes on a shared volume, so it is a
	// stat of the file. Zero: only this process changes the file [0].
	Watch time.Duration
}

// The cron scheduler's bounds: not config keys, because they guard against
// a model that schedules without end rather than express a user's choice.
const (
	// DefaultMaxJobsPerChat bounds the jobs one chat may have.
	DefaultMaxJobsPerChat = 20
	// DefaultMinInterval is the shortest "every" a job may have.
	DefaultMinInterval = time.Minute
	// DefaultLateAfter is how far past its due time a run is flagged late.
	DefaultLateAfter = time.Minute
	// DefaultMaxJobMessage caps a job's instruction in characters.
	DefaultMaxJobMessage = 4000
)

func (c CronConfig) withDefaults() CronConfig {
	if c.MaxJobsPerChat <= 0 {
		c.MaxJobsPerChat = DefaultMaxJobsPerChat
	}
	if c.MinInterval <= 0 {
		c.MinInterval = DefaultMinInterval
	}
	if c.LateAfter <= 0 {
		c.LateAfter = DefaultLateAfter
	}
	if c.MaxMessage <= 0 {
		c.MaxMessage = DefaultMaxJobMessage
	}
	return c
}

// CronDeps are the scheduler's collaborators.
type CronDeps struct {
	Bus Inbound
	// Clock is the time source [the system clock].
	Clock clock.Clock
}

// Cron keeps the jobs, persists them in jobs.json and publishes each run on
// the bus when it is due. Create it with NewCron, run it with Run, and give
// the model its Tool. It is safe for concurrent use.
//
// Delivery: a one-shot job stays in the file until the agent has recorded
// its run in the chat's session (the inbound message's Ack), so a run lost
// to a shutdown happens after the restart, flagged late; it is never lost,
// and at worst repeated once if the daemon dies between the two writes. A
// recurring job's next time is saved as soon as its run is on the bus: a
// missed occurrence of a recurring job is not worth a duplicate.
//
// Several processes may share the jobs file (the agent workers of a split
// gateway): every change is made under an advisory lock of the file, on the
// jobs as the file holds them then, so one process never overwrites another's
// change; and every read first checks whether the file was replaced.
type Cron struct {
	cfg   CronConfig
	bus   Inbound
	clock clock.Clock
	log   *zap.Logger
	wake  chan struct{} // a job was added or removed; capacity 1

	mu    sync.Mutex
	ready bool // the file has been read
	// seen is the jobs file as this process last read or wrote it (nil:
	// there was none); a file that differs was replaced by another process.
	seen     os.FileInfo
	jobs     map[string]*Job
	broken   []json.RawMessage // unusable entries, written back as they were
	inflight map[string]bool   // one-shots on the bus, waiting for their Ack
}

// NewCron returns a scheduler; it does no I/O (the file is read on first use).
func NewCron(cfg CronConfig, deps CronDeps, log *zap.Logger) *Cron {
	clk := deps.Clock
	if clk == nil {
		clk = clock.System{}
	}
	return &Cron{
		cfg: cfg.withDefaults(), bus: deps.Bus, clock: clk, log: log,
		wake: make(chan struct{}, 1), jobs: map[string]*Job{}, inflight: map[string]bool{},
	}
}

// Run publishes due jobs until ctx ends. It sleeps until the soonest job is
// due and wakes early when jobs change. Jobs missed while the daemon was
// down run once at start: one-shots flagged late, recurring jobs once (late)
// and then on their schedule, never once per missed occurrence. It fails
// only if the jobs file cannot be read.
func (c *Cron) Run(ctx context.Context) error {
	c.mu.Lock()
	err := c.loadLocked()
	n := len(c.jobs)
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("cron: %w", err)
	}
	c.log.Info("cron started", zap.Int("jobs", n), zap.String("file", c.cfg.Path))
	for {
		if err := c.fireDue(ctx); err != nil {
			if ctx.Err() != nil {
				c.log.Info("cron stopped", zap.NamedError("reason", err))
				return nil
			}
			// The bus refused the run but the daemon goes on (NATS away
			// for longer than a publish waits): the job is still due, so
			// try again later rather than stop scheduling for good.
			c.log.Warn("cannot publish a due job; trying again", zap.Duration("in", publishRetry), zap.Error(err))
			if clock.Sleep(ctx, c.clock, publishRetry) != nil {
				return nil
			}
			continue
		}
		var timer, watch clock.Timer
		var fired, changed <-chan time.Time
		if next, ok := c.nextDue(); ok {
			timer = c.clock.NewTimer(next.Sub(c.clock.Now()))
			fired = timer.C()
		}
		if c.cfg.Watch > 0 {
			watch = c.clock.NewTimer(c.cfg.Watch)
			changed = watch.C()
		}
		select {
		case <-ctx.Done():
		case <-fired:
		case <-changed: // fireDue reloads the file if it was replaced
		case <-c.wake:
		}
		for _, t := range []clock.Timer{timer, watch} {
			if t != nil {
				t.Stop()
			}
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// publishRetry is the pause before a due job whose publish failed is tried
// again.
const publishRetry = 30 * time.Second

// Add creates a job for chat and returns it.
func (c *Cron) Add(chat Chat, w When, message string) (Job, error) {
	message = strings.TrimSpace(message)
	if message == "" {
		return Job{}, errors.New(`"message" is empty: write what to do, or what to remind the user of, when the job runs`)
	}
	if n := len([]rune(message)); n > c.cfg.MaxMessage {
		return Job{}, fmt.Errorf(`"message" is %d characters; at most %d are allowed`, n, c.cfg.MaxMessage)
	}
	now := c.clock.Now()
	spec, err := ParseWhen(w, now, c.cfg.MinInterval)
	if err != nil {
		return Job{}, err
	}
	unlock, err := filelock.WithMutex(&c.mu, c.lockFileLocked)
	if err != nil {
		return Job{}, err
	}
	defer unlock()
	if n := len(c.chatJobs(chat.Key())); n >= c.cfg.MaxJobsPerChat {
		return Job{}, fmt.Errorf("this chat already has %d jobs, the limit; remove one first (action \"list\" shows them)", n)
	}
	j := &Job{ID: c.newIDLocked(), Message: message, Schedule: spec, Chat: chat, CreatedAt: now, NextRun: spec.first(now)}
	c.jobs[j.ID] = j
	if err := c.saveLocked(); err != nil {
		delete(c.jobs, j.ID)
		return Job{}, fmt.Errorf("the job could not be saved, so it was not created: %w", err)
	}
	c.poke()
	c.log.Info("cron job added", zap.String("job", j.ID), zap.String("chat", chat.Key()),
		zap.String("schedule", spec.Describe()), zap.Time("next_run", j.NextRun))
	return *j, nil
}

// Jobs returns the jobs of the chat with session key key, soonest first.
func (c *Cron) Jobs(key string) ([]Job, error) { return c.snapshot(inChat(key)) }

// All returns the jobs of every chat, soonest first (the control panel).
func (c *Cron) All() ([]Job, error) { return c.snapshot(func(*Job) bool { return true }) }

// snapshot reloads the jobs file if another process changed it and returns
// copies of the jobs keep accepts, soonest first.
func (c *Cron) snapshot(keep func(*Job) bool) ([]Job, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.loadLocked(); err != nil {
		return nil, err
	}
	list := c.where(keep)
	out := make([]Job, len(list))
	for i, j := range list {
		out[i] = *j
	}
	return out, nil
}

// Remove deletes the job id of the chat with session key key. Jobs of
// other chats cannot be seen or removed from this one.
func (c *Cron) Remove(key, id string) (Job, error) {
	unlock, err := filelock.WithMutex(&c.mu, c.lockFileLocked)
	if err != nil {
		return Job{}, err
	}
	defer unlock()
	j, ok := c.jobs[strings.TrimSpace(id)]
	if !ok || j.Chat.Key() != key {
		ids := make([]string, 0)
		for _, o := range c.chatJobs(key) {
			ids = append(ids, o.ID)
		}
		if len(ids) == 0 {
			return Job{}, fmt.Errorf("there is no job %q in this chat; it has no jobs", id)
		}
		return Job{}, fmt.Errorf("there is no job %q in this chat; its jobs are: %s", id, strings.Join(ids, ", "))
	}
	delete(c.jobs, j.ID)
	if err := c.saveLocked(); err != nil {
		c.jobs[j.ID] = j
		return Job{}, fmt.Errorf("the job could not be removed: %w", err)
	}
	delete(c.inflight, j.ID)
	c.poke()
	c.log.Info("cron job removed", zap.String("job", j.ID), zap.String("chat", key))
	return *j, nil
}

// fireDue publishes every job due now. An error means the bus no longer
// takes messages (shutdown).
func (c *Cron) fireDue(ctx context.Context) error {
	now := c.clock.Now()
	c.mu.Lock()
	if err := c.loadLocked(); err != nil {
		// The jobs as last read are still the best guess; the next look
		// may succeed.
		c.log.Warn("cannot read the jobs file again; keeping the jobs as last read", zap.Error(err))
	}
	var due []*Job
	for _, j := range c.jobs {
		if !c.inflight[j.ID] && !j.NextRun.After(now) {
			cp := *j
			due = append(due, &cp)
		}
	}
	c.mu.Unlock()
	sortJobs(due)
	for _, j := range due {
		if err := c.fire(ctx, *j, now); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cron) fire(ctx context.Context, j Job, now time.Time) error {
	late := now.Sub(j.NextRun) > c.cfg.LateAfter
	var next time.Time
	if j.Schedule.Recurring() {
		next = j.Schedule.after(j.NextRun, now)
	}
	m := bus.InboundMessage{
		Channel: j.Chat.Channel, ChatID: j.Chat.ChatID, SenderID: j.Chat.SenderID, SenderName: "cron",
		SessionKey: j.Chat.SessionKey, Content: instruction(j, now, next, late), Time: now,
		Metadata: withSource(j.Chat.Metadata, map[string]string{MetaSource: SourceCron, MetaJobID: j.ID}),
	}
	if !j.Schedule.Recurring() {
		var once sync.Once
		m.Ack = func() { once.Do(func() { c.delivered(j.ID) }) }
		c.mu.Lock()
		c.inflight[j.ID] = true
		c.mu.Unlock()
	}
	if err := c.bus.PublishInbound(ctx, m); err != nil {
		c.mu.Lock()
		delete(c.inflight, j.ID)
		c.mu.Unlock()
		return fmt.Errorf("publish job %s: %w", j.ID, err)
	}
	c.log.Info("cron job due", zap.String("job", j.ID), zap.String("chat", j.Chat.Key()),
		zap.Time("due", j.NextRun), zap.Bool("late", late))
	if !j.Schedule.Recurring() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if unlock, err := c.lockFileLocked(); err != nil {
		// The next run is still set in memory: the job must not run again
		// at once.
		c.log.Error("cannot lock the jobs file to save the next run", zap.String("job", j.ID), zap.Error(err))
	} else {
		defer unlock()
	}
	cur, ok := c.jobs[j.ID]
	if !ok {
		return nil // removed while it was being published
	}
	cur.LastRun, cur.Runs, cur.NextRun = now, cur.Runs+1, next
	if next.IsZero() {
		c.log.Warn("cron job has no further run; removing it", zap.String("job", j.ID))
		delete(c.jobs, j.ID)
	}
	_ = c.saveLocked()
	return nil
}

// delivered removes a one-shot job once its run is recorded in the chat's
// session. It may run after Run returned (the agent drains at shutdown).
func (c *Cron) delivered(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.inflight, id)
	unlock, err := c.lockFileLocked()
	if err != nil {
		// It stays in the file, and runs once more after a restart.
		c.log.Error("cannot lock the jobs file to remove a one-time job", zap.String("job", id), zap.Error(err))
		return
	}
	defer unlock()
	if _, ok := c.jobs[id]; !ok {
		return
	}
	delete(c.jobs, id)
	if c.saveLocked() == nil {
		c.log.Info("one-time cron job done", zap.String("job", id))
	}
}

// nextDue is when the soonest job not already on the bus is due.
func (c *Cron) nextDue() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var next time.Time
	for _, j := range c.jobs {
		if !c.inflight[j.ID] && (next.IsZero() || j.NextRun.Before(next)) {
			next = j.NextRun
		}
	}
	return next, !next.IsZero()
}

func (c *Cron) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// loadLocked makes the jobs those of the file: it reads the file the first
// time and again whenever another process replaced it since (otherwise it
// costs a stat). A file that is not JSON is moved aside (kept for the user)
// and the scheduler starts empty; a file that cannot be read is an error.
func (c *Cron) loadLocked() error {
	if c.ready && c.unchangedLocked() {
		return nil
	}
	l, err := readJobs(c.cfg.Path)
	if errors.Is(err, errCorrupt) {
		dst, mvErr := moveAside(c.cfg.Path, c.clock.Now())
		if mvErr != nil {
			return errors.Join(err, mvErr)
		}
		c.log.Error("jobs file unreadable; moved aside, starting with no jobs", zap.String("moved_to", dst), zap.Error(err))
		l, err = loaded{}, nil
	}
	if err != nil {
		return err
	}
	for _, p := range l.problems {
		c.log.Error("jobs file entry not usable; kept in the file, not scheduled", zap.String("problem", p))
	}
	reload := c.ready
	c.jobs = make(map[string]*Job, len(l.jobs))
	for _, j := range l.jobs {
		c.jobs[j.ID] = j
	}
	for id := range c.inflight {
		if c.jobs[id] == nil {
			delete(c.inflight, id) // removed elsewhere while its run was on the bus
		}
	}
	c.broken, c.seen, c.ready = l.broken, l.info, true
	if reload {
		c.log.Info("jobs file changed by another process; reloaded", zap.Int("jobs", len(c.jobs)))
	}
	return nil
}

// unchangedLocked reports whether the jobs file is the one last read or
// written here. Every write replaces the file (a new inode, renamed over
// it), so identity alone tells; size and time guard file systems that reuse
// inodes.
func (c *Cron) unchangedLocked() bool {
	fi, err := os.Stat(c.cfg.Path)
	if err != nil {
		return errors.Is(err, os.ErrNotExist) && c.seen == nil
	}
	return c.seen != nil && os.SameFile(fi, c.seen) && fi.Size() == c.seen.Size() && fi.ModTime().Equal(c.seen.ModTime())
}

// lockFileLocked takes the jobs file's lock, for a change, and reloads the
// jobs if another process changed them: the change applies to what the
// file holds now, and nobody else writes it until unlock.
func (c *Cron) lockFileLocked() (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(c.cfg.Path), 0o700); err != nil {
		return nil, fmt.Errorf("lock jobs file: %w", err)
	}
	unlock, err = filelock.Acquire(filepath.Join(filepath.Dir(c.cfg.Path), "."+filepath.Base(c.cfg.Path)+".lock"))
	if err != nil {
		return nil, err
	}
	if err := c.loadLocked(); err != nil {
		unlock()
		return nil, err
	}
	return unlock, nil
}

// saveLocked writes the jobs; it is called with the file's lock held, so
// the file it then finds is its own.
func (c *Cron) saveLocked() error {
	err := writeJobs(c.cfg.Path, c.jobs, c.broken)
	if err != nil {
		c.log.Error("save jobs", zap.Error(err))
		return err
	}
	if fi, statErr := os.Stat(c.cfg.Path); statErr == nil {
		c.seen = fi
	}
	return nil
}

func (c *Cron) chatJobs(key string) []*Job { return c.where(inChat(key)) }

// where returns the jobs keep accepts, soonest first.
func (c *Cron) where(keep func(*Job) bool) []*Job {
	var list []*Job
	for _, j := range c.jobs {
		if keep(j) {
			list = append(list, j)
		}
	}
	sortJobs(list)
	return list
}

// inChat accepts the jobs of the chat with session key key.
func inChat(key string) func(*Job) bool {
	return func(j *Job) bool { return j.Chat.Key() == key }
}

func (c *Cron) newIDLocked() string {
	for {
		var b [4]byte
		_, _ = rand.Read(b[:])
		if id := hex.EncodeToString(b[:]); c.jobs[id] == nil {
			return id
		}
	}
}

// withSource returns a copy of meta with extra set.
func withSource(meta, extra map[string]string) map[string]string {
	out := make(map[string]string, len(meta)+len(extra))
	maps.Copy(out, meta)
	maps.Copy(out, extra)
	return out
}

// instruction is the text of a run's inbound message: what the model reads
// as the user turn. It never starts with "/", so it is never taken for a
// chat command.
func instruction(j Job, now, next time.Time, late bool) string {
	loc := j.Schedule.location()
	var b strings.Builder
	fmt.Fprintf(&b, "⏰ Scheduled job %s is due (%s; created %s).", j.ID, j.Schedule.Describe(), formatTime(j.CreatedAt, loc))
	if late {
		fmt.Fprintf(&b, " It is running LATE: it was due at %s, %s ago, while nanobot could not run it. Tell the user it comes late.",
			formatTime(j.NextRun, loc), shortDuration(now.Sub(j.NextRun).Truncate(time.Minute)))
	}
	b.WriteString(" The instruction saved with it:\n\n")
	b.WriteString(j.Message)
	b.WriteString("\n\nCarry it out now. Your reply is sent to this chat, so address the user directly.")
	if next.IsZero() {
		b.WriteString(" This was a one-time job; it is removed after this run.")
	} else {
		fmt.Fprintf(&b, " It runs again at %s.", formatTime(next, loc))
	}
	return b.String()
}
