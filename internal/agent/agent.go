package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/commands"
	"github.com/nanobot-go/nanobot/internal/history"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/session"
	"github.com/nanobot-go/nanobot/internal/tools"
	"github.com/nanobot-go/nanobot/internal/usage"
)

// Model is what the agent needs from the provider router.
type Model interface {
	// Complete runs one model call on route ("" for the default) and returns
	// the assistant message; onDelta sees the stream as it arrives. A failed
	// call returns an error and no message. The agent's requests carry no
	// Messages but a Fit, which Complete calls with the limits of each route
	// it tries (llm.Request.Fit).
	Complete(ctx context.Context, route string, req llm.Request, onDelta func(llm.Delta)) (llm.Message, error)
	// ContextWindow is the route's context window in tokens.
	ContextWindow(route string) int
	// Default is the default route's name; Routes lists the routes a user may pick.
	Default() string
	Routes() []string
	// Check reports whether route resolves.
	Check(route string) error
}

// Sessions is what the agent needs from the session store.
type Sessions interface {
	Get(key string) (session.Snapshot, error)
	Append(key string, msgs ...llm.Message) (session.Snapshot, error)
	// Stage appends without waiting for the disk; the next Append or Sync
	// of the session makes it durable.
	Stage(key string, msgs ...llm.Message) (session.Snapshot, error)
	Sync(key string) error
	SetMeta(key string, u session.MetaUpdate) error
	Archive(key string) (string, error)
}

// Tools is what the agent needs from the tool registry.
type Tools interface {
	// Specs returns the tools' specs. It may return the same slice while
	// the tools are unchanged (the agent keys its token estimate on it), so
	// it must never modify a slice it returned.
	Specs() []llm.ToolSpec
	Execute(ctx context.Context, call llm.ToolCall, origin tools.Origin) llm.ToolResult
}

// readOnlyTools is implemented by registries that know which tools only read,
// so one model turn's read-only calls may run in parallel.
type readOnlyTools interface {
	ReadOnly(name string) bool
}

// Observer is told how each turn ended, for metrics. Its methods must be
// cheap and safe for concurrent use; a nil Deps.Observer observes nothing.
type Observer interface {
	// TurnDone reports a finished turn: its outcome (OutcomeAnswered,
	// OutcomeFailed, OutcomeStopped or OutcomeInterrupted) and how long it
	// took from its start, waiting for a free slot included.
	TurnDone(outcome string, elapsed time.Duration)
}

// Turn outcomes reported to the Observer.
const (
	// OutcomeAnswered: the turn ended with a reply (or the message tool replied).
	OutcomeAnswered = "answered"
	// OutcomeFailed: the user got an error message (model failure, disk full...).
	OutcomeFailed = "failed"
	// OutcomeStopped: the user cancelled it with /stop.
	OutcomeStopped = "stopped"
	// OutcomeInterrupted: shutdown cancelled it (Run's context ended).
	OutcomeInterrupted = "interrupted"
)

type nopObserver struct{}

func (nopObserver) TurnDone(string, time.Duration) {}

// Publisher sends replies to the channels.
type Publisher interface {
	PublishOutbound(ctx context.Context, m bus.OutboundMessage) error
}

// Config is the agent's part of the configuration. The fields that mirror a
// key (named on each, or in agentconfig.From) are taken as given: the agent
// defaults none of them, so build a Config with agentconfig.From, or
// agentconfig.Defaults in tests. The rest are internal bounds no key carries;
// zero takes the constant named in brackets.
type Config struct {
	Workspace string
	// MaxToolIterations caps the model calls of one turn
	// (agents.max_tool_iterations).
	MaxToolIterations int
	// MaxConcurrentTurns caps the turns running at once
	// (agents.max_concurrent_turns).
	MaxConcurrentTurns int
	// MaxGroupTurns caps the turns of group chats, all together (0:
	// MaxConcurrentTurns-1, at least 1); MaxTurnsPerGroup caps one group's
	// (0: half the group share, at least 1). See turnSlots.
	MaxGroupTurns    int
	MaxTurnsPerGroup int
	MaxTokens        int
	Temperature      *float64
	// MaxInputChars cuts longer inbound messages, with a note to the model
	// (agents.max_input_chars).
	MaxInputChars int
	// MaxQueue is how many messages may wait for a busy session; beyond it
	// the oldest are dropped and the user told so (agents.max_queue).
	MaxQueue int
	// DraftInterval is the minimum time between two streamed drafts of one
	// turn published on the bus [DefaultDraftInterval].
	DraftInterval time.Duration
	Version       string

	// HistoryBudget caps the tokens of a model call's system prompt and
	// history (history.budget); 0: the route's window less MaxTokens and
	// the tool list.
	HistoryBudget int
	// HistoryHighWater and HistoryLowWater are the water marks of the
	// projection, shares of the budget (history.high_water, low_water);
	// 0: history's defaults.
	HistoryHighWater, HistoryLowWater float64

	// MemoryWindow is how many unconsolidated messages trigger a memory
	// consolidation (agents.memory_window).
	MemoryWindow int
	// MemoryShare is the share of the route's context window the
	// unconsolidated messages may fill before they are consolidated
	// [DefaultMemoryShare].
	MemoryShare float64
	// MemoryRetry is the wait after a failed consolidation, doubled per
	// further failure [DefaultMemoryRetry].
	MemoryRetry time.Duration
	// MemoryMaxFailures is how many consecutive failures make the part be
	// saved to HISTORY.md as a raw transcript instead
	// [DefaultMemoryMaxFailures].
	MemoryMaxFailures int

	// SubagentIterations caps a subagent's model calls
	// [DefaultSubagentIterations].
	SubagentIterations int
	// SubagentTimeout bounds a subagent's whole run [DefaultSubagentTimeout].
	SubagentTimeout time.Duration
	// MaxSubagents caps the subagents running at once in total
	// [DefaultMaxSubagents].
	MaxSubagents int
	// MaxSubagentsPerSession caps them per session
	// [DefaultMaxSubagentsPerSession].
	MaxSubagentsPerSession int

	// publishWait bounds the publish of a best-effort message (draft,
	// status, turn start) on a full bus [defaultPublishWait]; tests shorten
	// it.
	publishWait time.Duration
}

// The agent's internal bounds: values no config key carries, because they
// protect the daemon rather than express a user's choice. Tests shorten some
// through Config; zero there takes these.
const (
	// DefaultDraftInterval spaces the drafts a turn publishes on the bus;
	// the channels throttle their edits further (channels.*.edit_interval).
	DefaultDraftInterval = 250 * time.Millisecond
	// DefaultMemoryShare is the share of the context window unconsolidated
	// messages may fill before consolidation runs, whatever memory_window.
	DefaultMemoryShare = 0.5
	// DefaultMemoryRetry is the first wait after a failed consolidation.
	DefaultMemoryRetry = time.Minute
	// DefaultMemoryMaxFailures is how many failures in a row save the part
	// as a raw transcript, so a broken model cannot grow a session forever.
	DefaultMemoryMaxFailures = 3
	// DefaultSubagentIterations caps a subagent's model calls.
	DefaultSubagentIterations = 15
	// DefaultSubagentTimeout bounds a subagent's whole run.
	DefaultSubagentTimeout = 15 * time.Minute
	// DefaultMaxSubagents caps the subagents running at once in total.
	DefaultMaxSubagents = 8
	// DefaultMaxSubagentsPerSession caps them per session.
	DefaultMaxSubagentsPerSession = 3
	// defaultPublishWait bounds a best-effort publish on a full bus.
	defaultPublishWait = 5 * time.Second
)

// projection returns the options of a model call's projection, given the
// budget the route leaves (its window less the reply and the tool list):
// history.budget may lower it, and the water marks are history's.
func (a *Agent) projection(budget, systemTokens int) history.Options {
	if c := a.cfg.HistoryBudget; c > 0 && c < budget {
		budget = c
	}
	return history.Options{Budget: budget, SystemTokens: systemTokens, HighWater: a.cfg.HistoryHighWater, LowWater: a.cfg.HistoryLowWater}
}

// fit returns the llm.Request.Fit of a model call: project with the
// options of the budget a route's limits leave (its window less the reply
// and the tool list).
func (a *Agent) fit(toolTokens int, project func(history.Options) []llm.Message, systemTokens int) func(llm.Limits) []llm.Message {
	return func(l llm.Limits) []llm.Message {
		return project(a.projection(l.ContextWindow-l.MaxTokens-toolTokens, systemTokens))
	}
}

// withDefaults fills the internal bounds left zero. It leaves alone the
// fields config carries: those are the caller's (agentconfig.From).
func (c Config) withDefaults() Config {
	if c.DraftInterval <= 0 {
		c.DraftInterval = DefaultDraftInterval
	}
	if c.publishWait <= 0 {
		c.publishWait = defaultPublishWait
	}
	if c.MemoryShare <= 0 || c.MemoryShare > 1 {
		c.MemoryShare = DefaultMemoryShare
	}
	if c.MemoryRetry <= 0 {
		c.MemoryRetry = DefaultMemoryRetry
	}
	if c.MemoryMaxFailures <= 0 {
		c.MemoryMaxFailures = DefaultMemoryMaxFailures
	}
	if c.SubagentIterations <= 0 {
		c.SubagentIterations = DefaultSubagentIterations
	}
	if c.SubagentTimeout <= 0 {
		c.SubagentTimeout = DefaultSubagentTimeout
	}
	if c.MaxSubagents <= 0 {
		c.MaxSubagents = DefaultMaxSubagents
	}
	if c.MaxSubagentsPerSession <= 0 {
		c.MaxSubagentsPerSession = DefaultMaxSubagentsPerSession
	}
	return c
}

// Deps are the agent's collaborators.
type Deps struct {
	Model    Model
	Sessions Sessions
	Tools    Tools
	Out      Publisher
	Prompt   *PromptBuilder
	// Clock is the turns' time [clock.System].
	Clock clock.Clock

	// Memory consolidates old messages into long-term memory; nil turns
	// consolidation off (and /new archives without saving).
	Memory Memory
	// SubagentTools are the tools subagents may use (the registry without
	// message, spawn and cron); nil turns the spawn tool off.
	SubagentTools Tools
	// In receives subagents' results for their chat; required with
	// SubagentTools.
	In InboundPublisher
	// StatusLines, when set, adds lines to /status (e.g. MCP servers).
	StatusLines func() []string
	// Redact removes the daemon's tokens and keys from error text shown in
	// chat (a provider may echo a header back) [no change].
	Redact func(string) string
	// Observer is told how each turn ended [nothing is].
	Observer Observer
	// Commands answer the chat commands the table in internal/commands
	// gives to the daemon (Handler commands.Daemon; the web page's /web
	// login link), by name without the slash. The agent routes them without
	// learning what they do: they are answered at once, never queued behind
	// a turn, and listed by /help when answered here. Entries for other
	// names are ignored (logged by New): the table decides who answers what.
	Commands map[string]Command
	// Usage is the usage ledger /usage reads; nil: /usage says this
	// process keeps none.
	Usage usage.Reader
	// Owner reports whether m comes from the daemon's owner, whom /usage
	// shows every chat's spending; nil: nobody is.
	Owner func(m bus.InboundMessage) bool
	// Budget admits each turn and subagent run at its first model call
	// [every call is admitted].
	Budget Budget
}

// Command answers a chat command outside the agent.
type Command struct {
	// Answer returns the reply to m. It runs on the dispatch goroutine, so
	// it must be quick and must not block.
	Answer func(m bus.InboundMessage) string
}

// Agent serves inbound messages. Create it with New and run it with Run.
type Agent struct {
	cfg     Config
	model   Model
	store   Sessions
	tools   Tools
	out     Publisher
	prompt  *PromptBuilder
	now     func() time.Time
	redact  func(string) string
	log     *zap.Logger
	obs     Observer
	budget  Budget
	started time.Time

	// turns caps concurrent turns across sessions, fairly between direct
	// messages and groups.
	turns *turnSlots

	mu     sync.Mutex
	active map[string]*sessionQueue
	wg     sync.WaitGroup
	// spare hands a session's work to a goroutine that has just finished
	// another's (see runSession).
	spare  chan func()
	spares atomic.Int32 // goroutines waiting on spare
	// quit is closed when Run ends, so that waiting goroutines exit at once
	// instead of after spareIdle (Run waits for them).
	quit     chan struct{}
	quitOnce sync.Once
	// spareIdle is spareIdleTime; tests lengthen it.
	spareIdle time.Duration
	// backlogWait is backlogWaitTime; tests shorten it.
	backlogWait time.Duration
	// runCtx is Run's context: its end (shutdown past the grace period) is
	// the only thing that cuts the publish of a final answer short.
	runCtx context.Context

	extra       map[string]Command
	memory      Memory
	mem         memoryStates
	tallies     tallies
	subTools    Tools
	in          InboundPublisher
	subs        subagents
	statusLines func() []string
	usage       usage.Reader
	owner       func(bus.InboundMessage) bool
	// spend sums the ledger's records of running turns with a footer.
	spend turnSpend

	// toolTokens and subToolTokens remember the token estimate of tools'
	// and subTools' specs.
	toolTokens, subToolTokens specMemo
}

// sessionQueue is one session's pending work and its running turn.
type sessionQueue struct {
	pending []bus.InboundMessage
	cancel  context.CancelCauseFunc // of the running turn, nil when idle
	// inTurn says the running work is a turn, not a command.
	inTurn bool
	// stopped says /stop cut the last turn short, so the next turn's
	// message tells the model its previous answer was never given.
	stopped bool
	// arrived is signalled when a message is queued, for a session
	// waiting for the rest of a backlog (InboundMessage.More).
	arrived chan struct{}
}

// New returns an agent; it does no I/O.
func New(cfg Config, deps Deps, log *zap.Logger) *Agent {
	cfg = cfg.withDefaults()
	if deps.Clock == nil {
		deps.Clock = clock.System{}
	}
	now := deps.Clock.Now
	redact := deps.Redact
	if redact == nil {
		redact = func(s string) string { return s }
	}
	obs := deps.Observer
	if obs == nil {
		obs = nopObserver{}
	}
	return &Agent{
		redact:      redact,
		cfg:         cfg,
		model:       deps.Model,
		store:       deps.Sessions,
		tools:       deps.Tools,
		out:         deps.Out,
		prompt:      deps.Prompt,
		now:         now,
		log:         log,
		obs:         obs,
		budget:      deps.Budget,
		started:     now(),
		turns:       newTurnSlots(cfg.MaxConcurrentTurns, cfg.MaxGroupTurns, cfg.MaxTurnsPerGroup),
		active:      make(map[string]*sessionQueue),
		spare:       make(chan func()),
		quit:        make(chan struct{}),
		spareIdle:   spareIdleTime,
		backlogWait: backlogWaitTime,
		runCtx:      context.Background(),

		extra:       daemonCommands(deps.Commands, log),
		memory:      deps.Memory,
		subTools:    deps.SubagentTools,
		in:          deps.In,
		statusLines: deps.StatusLines,
		usage:       deps.Usage,
		owner:       deps.Owner,
	}
}

// Run serves messages from in until in is closed (then it finishes the
// queued and running turns and returns) or ctx ends (then running turns are
// cancelled; their user messages are already persisted). It always waits for
// every goroutine it started. Subagents are cancelled when Run ends: their
// results could no longer be announced.
func (a *Agent) Run(ctx context.Context, in <-chan bus.InboundMessage) error {
	a.runCtx = ctx // before any turn starts: turns start from this goroutine
	a.subs.start(ctx)
	defer a.wg.Wait()
	defer a.quitOnce.Do(func() { close(a.quit) })
	defer a.subs.close()
	for {
		select {
		case <-ctx.Done():
			return nil
		case m, ok := <-in:
			if !ok {
				return nil
			}
			a.dispatch(ctx, m)
		}
	}
}

// dispatch handles the commands that must not wait behind a running turn
// and queues everything else on its session.
func (a *Agent) dispatch(ctx context.Context, m bus.InboundMessage) {
	if c, _, ok := commandOf(m); ok && !isSystem(m) {
		switch {
		case c.Name == "stop":
			a.stop(ctx, m)
			return
		case c.Handler == commands.Daemon:
			a.ack(m)
			a.notify(ctx, m, a.answerElsewhere(c, m), false)
			return
		case c.Handler == commands.AgentNow, c.Handler == commands.Intake:
			a.ack(m)
			a.command(ctx, m)
			return
		}
	}
	a.enqueue(ctx, m)
}

func (a *Agent) enqueue(ctx context.Context, m bus.InboundMessage) {
	key := m.Key()
	a.mu.Lock()
	q, ok := a.active[key]
	if !ok {
		q = &sessionQueue{arrived: make(chan struct{}, 1)}
		a.active[key] = q
		a.wg.Add(1)
		a.runSession(ctx, func() { a.serve(ctx, key, q) })
	}
	q.pending = append(q.pending, m)
	var dropped []bus.InboundMessage
	if over := len(q.pending) - a.cfg.MaxQueue; over > 0 {
		dropped = append(dropped, q.pending[:over]...)
		q.pending = append([]bus.InboundMessage(nil), q.pending[over:]...)
	}
	a.mu.Unlock()
	select {
	case q.arrived <- struct{}{}:
	default:
	}
	if len(dropped) > 0 {
		for _, d := range dropped {
			a.ack(d)
		}
		a.log.Warn("session queue full, dropped oldest messages", zap.String("session", key), zap.Int("dropped", len(dropped)))
		a.notify(ctx, m, "⚠️ You sent messages faster than I can answer; I skipped the oldest "+strconv.Itoa(len(dropped))+" of them.", true)
	}
}

// spareIdleTime is how long a goroutine that served a session waits for the
// next session's work before it exits; at most maxSpares wait at once, so
// that a burst of chats does not leave as many grown stacks behind.
const (
	spareIdleTime = time.Second
	maxSpares     = 8
)

// backlogWaitTime bounds how long a session waits for the rest of a
// backlog (InboundMessage.More) before it starts the turn with what came:
// the rest follows within milliseconds unless the channel dropped it (a
// stranger's message, a duplicate), and then the turn must not wait long.
const backlogWaitTime = 2 * time.Second

// awaitBacklog waits, with a.mu held on entry and on return, until the
// last message queued on q is not marked More, the wait is over, or ctx
// ends.
func (a *Agent) awaitBacklog(ctx context.Context, q *sessionQueue) {
	var timer *time.Timer
	for len(q.pending) > 0 && q.pending[len(q.pending)-1].More {
		if timer == nil {
			timer = time.NewTimer(a.backlogWait)
			defer timer.Stop()
		}
		a.mu.Unlock()
		select {
		case <-q.arrived:
		case <-timer.C:
			a.mu.Lock()
			return
		case <-ctx.Done():
			a.mu.Lock()
			return
		}
		a.mu.Lock()
	}
}

// runSession runs f on a goroutine that has just finished a session's work,
// if one is waiting, or on a new one, which waits spareIdle for more once f
// returns (or until ctx or Run ends). A turn runs deep (agent, router, provider,
// go-openai, net/http): on a fresh goroutine the stack grew to that depth by
// copying itself two or three times a turn, a share of a turn's CPU that
// showed in the profile under load (docs/BENCHMARKS.md#figures-behind-code-choices).
// A goroutine that waits a moment keeps its stack for the next turn.
func (a *Agent) runSession(ctx context.Context, f func()) {
	select {
	case a.spare <- f:
		return
	default:
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		idle := time.NewTimer(a.spareIdle)
		defer idle.Stop()
		for {
			f()
			if a.spares.Add(1) > maxSpares {
				a.spares.Add(-1)
				return
			}
			idle.Reset(a.spareIdle)
			var ok bool
			select {
			case f = <-a.spare:
				ok = true
			case <-idle.C:
			case <-ctx.Done():
			case <-a.quit:
			}
			a.spares.Add(-1)
			if !ok {
				return
			}
		}
	}()
}

// serve runs the session's queued work until the queue is empty. A burst of
// messages queued during a turn becomes one follow-up turn
// (docs/architecture.md#one-message-end-to-end).
func (a *Agent) serve(ctx context.Context, key string, q *sessionQueue) {
	defer a.wg.Done()
	for {
		a.mu.Lock()
		a.awaitBacklog(ctx, q)
		if len(q.pending) == 0 || ctx.Err() != nil {
			delete(a.active, key)
			a.mu.Unlock()
			return
		}
		batch := q.pending
		// A command is handled on its own, in order; plain messages that
		// arrived together are merged up to the next command.
		n := 1
		_, _, isCmd := commandOf(batch[0])
		if !isCmd {
			for n < len(batch) {
				if _, _, c := commandOf(batch[n]); c {
					break
				}
				n++
			}
		}
		q.pending = q.pending[n:]
		turnCtx, cancel := context.WithCancelCause(ctx)
		q.cancel = cancel
		afterStop := false
		if q.inTurn = !isCmd; q.inTurn {
			afterStop, q.stopped = q.stopped, false
		}
		a.mu.Unlock()

		if isCmd {
			a.ack(batch[0])
			a.command(turnCtx, batch[0])
		} else {
			a.runTurn(turnCtx, key, batch[:n], afterStop)
			if !batch[n-1].Ephemeral {
				a.afterTurn(ctx, key)
			}
		}
		cancel(nil)
		a.mu.Lock()
		q.cancel = nil
		a.mu.Unlock()
	}
}

// stop cancels the session's running turn (or command) at once. What was
// queued behind it stays queued and is answered next: it is usually the
// correction that made the user press stop, so it must be neither lost nor
// left unanswered (docs/sessions.md#stop). The reply says what comes next.
func (a *Agent) stop(ctx context.Context, m bus.InboundMessage) {
	key := m.Key()
	a.ack(m)
	a.mu.Lock()
	queued := 0
	running := false
	if q, ok := a.active[key]; ok {
		queued = len(q.pending)
		if q.cancel != nil {
			q.cancel(errStopped)
			q.stopped = q.stopped || q.inTurn
			running = true
		}
	}
	a.mu.Unlock()
	subagents := a.subs.cancelSession(key)
	a.log.Info("stop requested", zap.String("session", key), zap.Bool("running", running), zap.Int("queued", queued),
		zap.Int("subagents", subagents))
	a.notify(ctx, m, stopReply(running, queued, subagents), false)
}

// stopReply is /stop's answer: what it stopped, and what it answers next.
func stopReply(running bool, queued, subagents int) string {
	if !running && subagents == 0 {
		return "Nothing is running."
	}
	reply := "⏹ Stopped."
	if subagents > 0 {
		reply += fmt.Sprintf(" Cancelled %d background task(s).", subagents)
	}
	switch {
	case queued == 1:
		reply += " I'll answer the message you sent meanwhile now."
	case queued > 1:
		reply += fmt.Sprintf(" I'll answer the %d messages you sent meanwhile now.", queued)
	}
	return reply
}

// ack confirms an inbound message to its channel (see bus.InboundMessage.Ack).
func (a *Agent) ack(m bus.InboundMessage) {
	if m.Ack != nil {
		m.Ack()
	}
}

// notify sends a short standalone message to m's chat. It uses a context
// that outlives a cancelled turn so the user still hears why it ended.
func (a *Agent) notify(ctx context.Context, m bus.InboundMessage, text string, isErr bool) {
	a.publish(ctx, bus.OutboundMessage{
		Channel: m.Channel, ChatID: m.ChatID, Kind: bus.KindMessage, Content: text,
		ReplyTo: m.MessageID, Metadata: m.Metadata, IsError: isErr,
	})
}

// publish sends m on the bus; it outlives a cancelled turn (/stop) so the
// user still hears how it ended. A final answer or a standalone message is
// never given up for back-pressure: it waits for room, holding the turn
// and its slot (which slows intake rather than losing answers), until it
// is queued, the bus closes, or Run's context ends (shutdown past the grace
// period; the turn is then not acknowledged and its channel redelivers
// it). Drafts, statuses and turn starts are best effort and give up after
// publishWait. A closed bus during shutdown is logged, not fatal.
func (a *Agent) publish(ctx context.Context, m bus.OutboundMessage) {
	pctx, cancel := a.publishContext(ctx, m.Kind)
	defer cancel()
	if err := a.out.PublishOutbound(pctx, m); err != nil {
		log := a.log.Warn
		if m.Kind == bus.KindFinal {
			log = a.log.Error
		}
		log("publish reply failed", zap.String("channel", m.Channel), zap.String("chat", m.ChatID),
			zap.Stringer("kind", m.Kind), zap.Error(err))
	}
}

func (a *Agent) publishContext(ctx context.Context, k bus.Kind) (context.Context, context.CancelFunc) {
	base := context.WithoutCancel(ctx)
	if (k == bus.KindFinal || k == bus.KindMessage) && a.runCtx.Err() == nil {
		pctx, cancel := context.WithCancel(base)
		stop := context.AfterFunc(a.runCtx, cancel)
		return pctx, func() { stop(); cancel() }
	}
	// Best effort, and so is everything once shutdown cut the turns: a
	// short wait for the notice that a turn was interrupted.
	return context.WithTimeout(base, a.cfg.publishWait)
}

// answerElsewhere is the reply to a command another part of the daemon
// answers (Deps.Commands).
func (a *Agent) answerElsewhere(c commands.Command, m bus.InboundMessage) string {
	if answer := a.extra[c.Name].Answer; answer != nil {
		return answer(m)
	}
	return "/" + c.Name + " is not available in this process."
}

func newTurnID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
