package channels

import (
	"cmp"
	"container/list"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/llm"
)

// worker delivers one chat's messages in order. It is an event loop: the
// mailbox, the throttle and typing timers and shutdown wake it; platform
// calls happen on it, so one chat never has two calls in flight.
type worker struct {
	m     *Manager
	rt    *route
	key   chatKey
	box   *mailbox
	log   *zap.Logger
	clock clock.Clock

	turns map[string]*turn
	// nextEdit throttles draft edits chat-wide; paused holds them after a
	// 429 until the platform's retry_after has passed.
	nextEdit   time.Time
	paused     time.Time
	lastActive time.Time
	handled    int

	// poke asks an idle worker to retire at once (chats are parked);
	// parkElem and idleElem are its places in the manager's lists, guarded
	// by the manager's mu.
	poke     chan struct{}
	parkElem *list.Element
	idleElem *list.Element
}

// turn is what the worker knows about one streaming turn.
type turn struct {
	id      string
	replyTo string
	meta    map[string]string
	seen    time.Time

	typing      bool
	nextTyping  time.Time
	typingUntil time.Time

	draft  string // newest draft Markdown
	status string // tool hint shown under the draft
	dirty  bool   // draft or status not yet shown
	refs   []Sent // the draft's messages
	shown  []string
	// raw is the newest draft as the agent sent it (cumulative for the
	// model call); settled is the raw draft that stood when a message went
	// out mid-turn (see settleDrafts): drafts and the final that continue
	// it show only what is new, below that message.
	raw, settled string
	// broken stops streaming for the turn after a failure that makes the
	// draft message unusable; the final is then sent as new messages.
	broken   bool
	failures int
}

func newWorker(m *Manager, rt *route, key chatKey) *worker {
	return &worker{
		m:          m,
		rt:         rt,
		key:        key,
		box:        newMailbox(),
		log:        m.log.With(zap.String("channel", key.channel), zap.String("chat", key.chat)),
		clock:      m.clock,
		turns:      map[string]*turn{},
		lastActive: m.clock.Now(),
		poke:       make(chan struct{}, 1),
	}
}

func (w *worker) run() {
	defer w.m.wg.Done()
	for {
		for {
			msg, ok := w.box.pop()
			if !ok {
				break
			}
			w.handle(msg)
			w.handled++
		}
		now := w.clock.Now()
		w.due(now)
		if w.box.len() > 0 {
			continue
		}
		if w.stopping() {
			// Intake has stopped: nothing more arrives. Typing ends with
			// the worker (the indicator is never refreshed again).
			w.turns = nil
			if w.m.retire(w) {
				return
			}
			continue
		}
		wake, idle := w.nextWake(now)
		// An idle worker retires when its time is up, or at once while
		// chats are parked for want of a worker (else it waits, listed as
		// idle, so that parking a chat can poke it).
		if idle && (!now.Before(wake) || w.m.goIdle(w)) {
			if w.m.retire(w) {
				return
			}
			continue
		}
		w.wait(now, wake)
		if idle {
			w.m.leaveIdle(w)
		}
	}
}

// wait blocks until something is pushed, wake comes, the worker is poked
// or shutdown begins.
func (w *worker) wait(now, wake time.Time) {
	t := w.clock.NewTimer(wake.Sub(now))
	defer t.Stop()
	if !w.clock.Now().Before(wake) {
		// Time moved past wake while the timer was being armed (a fake
		// clock can jump); act now rather than miss the wake-up.
		return
	}
	if w.m.idleHook != nil {
		w.m.idleHook(w.key.chat, w.handled+w.box.coalescedCount(), now)
	}
	select {
	case <-w.box.signal:
	case <-t.C():
	case <-w.poke:
	case <-w.m.closing:
	case <-w.m.workCtx.Done():
	}
}

func (w *worker) stopping() bool {
	select {
	case <-w.m.closing:
		return true
	default:
		return w.m.workCtx.Err() != nil
	}
}

// nextWake returns when the worker must next act; idle means it has no
// turns and the time is when it may be reaped.
func (w *worker) nextWake(now time.Time) (time.Time, bool) {
	if len(w.turns) == 0 {
		return w.lastActive.Add(w.m.cfg.IdleTimeout), true
	}
	var wake time.Time
	earliest := func(t time.Time) {
		if wake.IsZero() || t.Before(wake) {
			wake = t
		}
	}
	for _, t := range w.turns {
		earliest(t.seen.Add(w.m.cfg.TypingCap))
		if t.typing {
			earliest(t.nextTyping)
		}
		if t.dirty && !t.broken {
			earliest(w.draftDue(t))
		}
	}
	if wake.Before(now) {
		wake = now
	}
	return wake, false
}

// draftDue is when t's pending draft may be shown: the first draft goes out
// at once, later ones wait for the throttle; all wait out a 429 pause.
func (w *worker) draftDue(t *turn) time.Time {
	due := w.paused
	if len(t.refs) > 0 && w.nextEdit.After(due) {
		due = w.nextEdit
	}
	return due
}

func (w *worker) handle(msg bus.OutboundMessage) {
	now := w.clock.Now()
	w.lastActive = now
	out := w.rt.out
	switch msg.Kind {
	case bus.KindStart:
		t := w.turn(msg, now)
		if w.rt.typer != nil && !t.typing {
			t.typing = true
			t.typingUntil = now.Add(w.m.cfg.TypingCap)
			if out.TypingDelay > 0 {
				// A quick answer needs no indicator, and its delivery does
				// not wait behind the indicator's call on this worker.
				t.nextTyping = now.Add(out.TypingDelay)
			} else {
				w.sendTyping(t, now)
			}
		}
	case bus.KindDraft:
		if !out.Streaming {
			return
		}
		t := w.turn(msg, now)
		t.raw = msg.Content
		t.draft, t.status, t.dirty = t.unsettled(msg.Content), "", true
	case bus.KindStatus:
		if !out.Streaming || !out.ToolHints {
			return
		}
		t := w.turn(msg, now)
		t.status, t.dirty = msg.Content, true
	case bus.KindFinal:
		t := w.turns[msg.TurnID]
		if t == nil {
			t = w.recall(msg, now) // a draft shown before this process started
		}
		delete(w.turns, msg.TurnID)
		if t != nil {
			msg.Content = t.unsettled(msg.Content)
		}
		w.delivered(msg, w.deliverFinal(t, msg))
	case bus.KindMessage:
		w.settleDrafts()
		w.delivered(msg, w.deliverNew(msg))
	default:
		w.log.Warn("outbound message of unknown kind dropped", zap.Stringer("kind", msg.Kind))
	}
}

// delivered counts msg's outcome (err is its delivery's first failure) and
// tells its sender that it went out or was given up on for good; not when
// shutdown cut its delivery short, so that a channel that redelivers asks
// the question again after the restart.
func (w *worker) delivered(msg bus.OutboundMessage, err error) {
	outcome := ReplyDelivered
	switch {
	case w.m.workCtx.Err() != nil:
		outcome = ReplyCut
	case err != nil:
		outcome = ReplyFailed
	}
	w.m.reply(w.key.channel, msg, outcome)
	if msg.Delivered != nil && outcome != ReplyCut {
		msg.Delivered()
	}
}

func (w *worker) turn(msg bus.OutboundMessage, now time.Time) *turn {
	t := w.turns[msg.TurnID]
	if t == nil && msg.Kind != bus.KindStart {
		// A turn that starts here is new; one that does not may have
		// begun before this process did.
		t = w.recall(msg, now)
	}
	if t == nil {
		t = &turn{id: msg.TurnID, replyTo: PlatformID(msg.ReplyTo), meta: msg.Metadata}
		w.turns[msg.TurnID] = t
	}
	t.seen = now
	return t
}

// recall returns msg's turn as the draft record knows it: the platform
// messages its draft showed before this process started (docs:
// DraftRecord), or nil when there were none. What they show is unknown, so
// the next draft or the final edits every one of them.
func (w *worker) recall(msg bus.OutboundMessage, now time.Time) *turn {
	if w.m.cfg.Drafts == nil || msg.TurnID == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(w.m.workCtx, w.m.cfg.CallTimeout)
	defer cancel()
	refs, err := w.m.cfg.Drafts.Recall(ctx, w.key.channel, msg.TurnID)
	if err != nil {
		w.log.Warn("cannot read the draft record; a draft shown before a restart may stay beside the answer",
			zap.String("turn", msg.TurnID), zap.Error(err))
		return nil
	}
	if len(refs) == 0 {
		return nil
	}
	t := &turn{id: msg.TurnID, replyTo: msg.ReplyTo, meta: msg.Metadata, seen: now, refs: refs, shown: make([]string, len(refs))}
	w.turns[msg.TurnID] = t
	w.log.Info("recalled a draft shown before the restart; editing the answer into it", zap.String("turn", msg.TurnID), zap.Int("messages", len(refs)))
	return t
}

// remember records t's draft messages (see DraftRecord), before anything
// else happens in the chat: a process killed after a draft went out finds
// it again. A failure is logged; streaming goes on.
func (w *worker) remember(t *turn) {
	if w.m.cfg.Drafts == nil || t.id == "" {
		return
	}
	ctx, cancel := context.WithTimeout(w.m.workCtx, w.m.cfg.CallTimeout)
	defer cancel()
	if err := w.m.cfg.Drafts.Remember(ctx, w.key.channel, t.id, t.refs); err != nil {
		w.log.Warn("cannot record the draft; after a restart the answer may show beside it", zap.String("turn", t.id), zap.Error(err))
	}
}

// due does whatever has come due: typing refreshes, throttled draft edits,
// and forgetting turns that never ended.
func (w *worker) due(now time.Time) {
	for id, t := range w.turns {
		if !now.Before(t.seen.Add(w.m.cfg.TypingCap)) {
			w.log.Warn("turn never finished; typing stopped and its draft abandoned", zap.String("turn", id))
			delete(w.turns, id)
			continue
		}
		if t.typing && !now.Before(t.nextTyping) {
			if !now.Before(t.typingUntil) {
				t.typing = false
			} else {
				w.sendTyping(t, now)
			}
		}
		if t.dirty && !t.broken && !now.Before(w.draftDue(t)) {
			w.flushDraft(t, now)
		}
	}
}

func (w *worker) sendTyping(t *turn, now time.Time) {
	interval := w.rt.typer.TypingInterval()
	t.nextTyping = now.Add(interval)
	ctx, cancel := context.WithTimeout(w.m.workCtx, w.m.cfg.CallTimeout)
	defer cancel()
	err := w.rt.typer.Typing(ctx, w.key.chat, t.meta)
	w.observe("typing", err)
	var rl *RateLimitError
	var pe *PermanentError
	switch {
	case err == nil:
	case errors.As(err, &rl):
		t.nextTyping = now.Add(max(interval, rl.RetryAfter))
	case errors.As(err, &pe):
		t.typing = false
		w.log.Debug("typing refused; indicator stopped", zap.Error(err))
	default:
		w.log.Debug("typing failed", zap.Error(err))
	}
}

// draftText is the draft as shown: plain text with the tool hint under it.
func (t *turn) draftText() string {
	text := t.draft
	if t.status != "" {
		if text != "" {
			text += "\n\n"
		}
		text += "… " + t.status
	}
	return text
}

// flushDraft shows the turn's newest draft: edits the draft messages whose
// text changed and sends the ones it grew into. Drafts are plain text, so a
// half-written `**` cannot make the platform refuse them.
func (w *worker) flushDraft(t *turn, now time.Time) {
	chunks := w.rt.r.RenderPlain(t.draftText())
	w.nextEdit = now.Add(w.rt.out.EditInterval)
	for i, c := range chunks {
		if i < len(t.shown) && t.shown[i] == c {
			continue
		}
		ctx, cancel := context.WithTimeout(w.m.workCtx, w.m.cfg.CallTimeout)
		var err error
		if i < len(t.refs) {
			err = w.rt.editor.Edit(ctx, t.refs[i], c, true)
			w.observe("edit", err)
			if errors.Is(err, ErrNotModified) {
				err = nil
			}
		} else {
			var sent Sent
			replyTo := ""
			if i == 0 {
				replyTo = t.replyTo
			}
			sent, err = w.rt.ch.Send(ctx, Outgoing{ChatID: w.key.chat, Text: c, Plain: true, ReplyTo: replyTo, Metadata: t.meta})
			w.observe("send", err)
			if err == nil {
				t.refs = append(t.refs, sent)
				t.shown = append(t.shown, "")
				w.remember(t)
			}
		}
		cancel()
		if err != nil {
			w.draftFailed(t, now, i < len(t.refs), err)
			return
		}
		t.shown[i] = c
	}
	t.dirty = false
	t.failures = 0
}

// draftFailed decides what a failed draft update means. Drafts are best
// effort: a 429 pauses edits (the newest text goes out after it), other
// failures either retry at the next tick or give up streaming for the turn.
func (w *worker) draftFailed(t *turn, now time.Time, edit bool, err error) {
	var rl *RateLimitError
	var uo *UnknownOutcomeError
	var pe *PermanentError
	switch {
	case errors.As(err, &rl):
		w.paused = now.Add(max(rl.RetryAfter, w.m.cfg.Retry.BaseBackoff))
		w.log.Debug("draft rate limited; edits paused", zap.Duration("retry_after", rl.RetryAfter))
		return
	case errors.As(err, &uo) && !edit:
		// The draft message may or may not exist; sending another could
		// show it twice. Stop streaming; the final goes out as new messages.
		t.broken = true
		w.log.Warn("draft send outcome unknown; streaming stopped for this turn", zap.Error(err))
		return
	case errors.As(err, &pe), errors.Is(err, ErrBadMarkup):
		t.broken = true
		w.log.Warn("draft refused; streaming stopped for this turn", zap.Error(err))
		return
	case w.m.workCtx.Err() != nil:
		return
	}
	// Transient (or an edit whose outcome is unknown: edits are idempotent).
	t.failures++
	if t.failures >= w.m.cfg.Retry.MaxAttempts {
		t.broken = true
		w.log.Warn("draft failed repeatedly; streaming stopped for this turn", zap.Error(err))
		return
	}
	w.nextEdit = now.Add(w.backoff(t.failures))
}

// deliverFinal shows a turn's answer: it replaces the draft (first chunks
// edited into the draft messages, the rest sent as new messages), or is sent
// as new messages when there is no usable draft. An empty final removes the
// draft's tool hint or the draft itself.
func (w *worker) deliverFinal(t *turn, msg bus.OutboundMessage) error {
	usable := t != nil && !t.broken && len(t.refs) > 0
	if strings.TrimSpace(msg.Content) == "" && len(msg.Media) == 0 {
		if usable {
			w.clearDraft(t)
		}
		return nil
	}
	if !usable {
		return w.deliverNew(msg)
	}
	var failed error
	chunks := w.render(msg.Content)
	i := 0
	for ; i < len(chunks) && i < len(t.refs); i++ {
		ref, c := t.refs[i], chunks[i]
		err := w.retry("edit", true, func(ctx context.Context, plain bool) error {
			text := c.Text
			if plain {
				text = c.Plain
			}
			return w.rt.editor.Edit(ctx, ref, text, plain)
		})
		if err != nil {
			// The draft message cannot take the text; send it anew so the
			// answer is complete, and remove the stale draft so the user
			// does not see the half-written answer next to the whole one.
			w.log.Warn("final edit failed; sending the chunk as a new message", zap.Error(err))
			failed = cmp.Or(failed, w.sendChunk(msg, c, i == 0))
			w.removeDraftMessage(ref)
		}
	}
	for j := len(chunks); j < len(t.refs); j++ {
		w.removeDraftMessage(t.refs[j])
	}
	for ; i < len(chunks); i++ {
		failed = cmp.Or(failed, w.sendChunk(msg, chunks[i], false))
	}
	return cmp.Or(failed, w.sendMedia(msg, len(chunks) == 0))
}

// settleDrafts leaves the drafts on screen as they are before a message
// goes out in the middle of a turn (a message-tool note, a reminder): their
// tool hint is taken off (a draft that was only a hint is deleted where the
// platform allows), and the turn's later drafts and its final start new
// messages below the one going out. Otherwise the answer would be edited
// into a message above the note, where the user neither sees it arrive nor
// is notified of it
// (docs/reliability.md#every-turn-ends-with-something-to-read).
func (w *worker) settleDrafts() {
	for _, t := range w.turns {
		if len(t.refs) == 0 || t.broken {
			continue
		}
		hinted := t.status != ""
		t.status = ""
		switch {
		case t.draft == "":
			w.clearDraft(t)
		case hinted || t.dirty:
			w.showPlain(t, t.draft, "could not settle the draft")
		}
		if t.draft != "" {
			t.settled = t.raw
		}
		t.draft, t.dirty, t.refs, t.shown = "", false, nil, nil
		w.remember(t) // the settled messages are no longer the draft's
	}
}

// unsettled is text without the part already left standing above a
// mid-turn message: the agent's drafts are cumulative per model call, so
// a call that goes on after the message repeats it. Text that does not
// continue it belongs to a new call and is shown whole.
func (t *turn) unsettled(text string) string {
	if t.settled == "" {
		return text
	}
	if rest, ok := strings.CutPrefix(text, t.settled); ok {
		return strings.TrimLeft(rest, " \n")
	}
	t.settled = ""
	return text
}

// showPlain edits the draft messages to read text, as plain text; a failed
// edit is logged as failure.
func (w *worker) showPlain(t *turn, text, failure string) {
	chunks := w.rt.r.RenderPlain(text)
	for i := 0; i < len(chunks) && i < len(t.refs); i++ {
		ref, c := t.refs[i], chunks[i]
		if err := w.retry("edit", true, func(ctx context.Context, _ bool) error {
			return w.rt.editor.Edit(ctx, ref, c, true)
		}); err != nil {
			w.log.Warn(failure, zap.Error(err))
		}
	}
}

// clearDraft handles an empty final: the answer went out another way (the
// message tool), so the draft is deleted, or at least stripped of its hint.
func (w *worker) clearDraft(t *turn) {
	if w.rt.deleter != nil {
		for _, ref := range t.refs {
			w.removeDraftMessage(ref)
		}
		return
	}
	if t.status == "" || t.draft == "" {
		return
	}
	t.status = ""
	w.showPlain(t, t.draft, "could not strip the tool hint from the draft")
}

func (w *worker) removeDraftMessage(ref Sent) {
	if w.rt.deleter == nil {
		return
	}
	if err := w.retry("delete", true, func(ctx context.Context, _ bool) error {
		return w.rt.deleter.Delete(ctx, ref)
	}); err != nil {
		w.log.Warn("could not delete a draft message", zap.Error(err))
	}
}

// deliverNew sends msg as new messages: its text chunks, then its media.
// It returns the first failure; the other parts are still sent.
func (w *worker) deliverNew(msg bus.OutboundMessage) error {
	chunks := w.render(msg.Content)
	var failed error
	for i, c := range chunks {
		failed = cmp.Or(failed, w.sendChunk(msg, c, i == 0))
	}
	return cmp.Or(failed, w.sendMedia(msg, len(chunks) == 0))
}

func (w *worker) render(md string) []Chunk {
	if strings.TrimSpace(md) == "" {
		return nil
	}
	if w.rt.chunks != nil {
		return w.rt.chunks.RenderChunks(md)
	}
	texts := w.rt.r.Render(md)
	out := make([]Chunk, len(texts))
	for i, t := range texts {
		out[i] = Chunk{Text: t, Plain: t}
	}
	return out
}

func (w *worker) sendChunk(msg bus.OutboundMessage, c Chunk, first bool) error {
	out := Outgoing{ChatID: w.key.chat, Metadata: msg.Metadata}
	if first {
		out.ReplyTo = PlatformID(msg.ReplyTo)
	}
	err := w.retry("send", false, func(ctx context.Context, plain bool) error {
		o := out
		o.Text, o.Plain = c.Text, plain
		if plain {
			o.Text = c.Plain
		}
		_, err := w.rt.ch.Send(ctx, o)
		return err
	})
	if err != nil {
		w.log.Error("message chunk not delivered", zap.Stringer("kind", msg.Kind), zap.String("turn", msg.TurnID),
			zap.String("outcome", errorKind(err)), zap.Error(err))
	}
	return err
}

// sendMedia sends each attachment in its own call, so a retry after a 429
// never repeats an attachment that already went out.
func (w *worker) sendMedia(msg bus.OutboundMessage, reply bool) error {
	var failed error
	for i, part := range msg.Media {
		out := Outgoing{ChatID: w.key.chat, Metadata: msg.Metadata, Media: []llm.Part{part}}
		if reply && i == 0 {
			out.ReplyTo = PlatformID(msg.ReplyTo)
		}
		err := w.retry("send media", false, func(ctx context.Context, _ bool) error {
			_, err := w.rt.ch.Send(ctx, out)
			return err
		})
		if err != nil {
			w.log.Error("attachment not delivered", zap.String("turn", msg.TurnID), zap.Int("part", i),
				zap.String("outcome", errorKind(err)), zap.Error(err))
			failed = cmp.Or(failed, err)
		}
	}
	return failed
}

// retry runs one platform call under the retry policy. plain tells the call
// to use the plain rendering (after ErrBadMarkup). Edits and deletes are
// idempotent, so an unknown outcome is retried for them; a send whose
// outcome is unknown is never repeated, so no chunk is sent twice.
//
// A rate-limited try does not count against MaxAttempts, only its wait
// against MaxWait: the platform said the call was not made and when to come
// back, so a storm of 429s delays the answer rather than losing it.
func (w *worker) retry(op string, idempotent bool, call func(ctx context.Context, plain bool) error) error {
	pol := w.m.cfg.Retry
	plain := false
	var waited time.Duration
	tries := 0
	for attempt := 1; ; attempt++ {
		tries++
		ctx, cancel := context.WithTimeout(w.m.workCtx, w.m.cfg.CallTimeout)
		err := call(ctx, plain)
		cancel()
		w.observe(op, err)
		var rl *RateLimitError
		var uo *UnknownOutcomeError
		var pe *PermanentError
		var wait time.Duration
		switch {
		case err == nil, errors.Is(err, ErrNotModified):
			return nil
		case errors.Is(err, ErrBadMarkup) && !plain:
			w.log.Info("markup refused; resending as plain text", zap.String("op", op), zap.Error(err))
			plain = true
			attempt--
			continue
		case errors.As(err, &rl):
			wait = max(rl.RetryAfter, pol.BaseBackoff)
			attempt--
		case errors.As(err, &uo) && !idempotent:
			return err
		case errors.As(err, &pe), errors.Is(err, ErrBadMarkup):
			return err
		case w.m.workCtx.Err() != nil:
			return err
		default:
			wait = w.backoff(attempt)
		}
		if attempt >= pol.MaxAttempts || waited+wait > pol.MaxWait {
			return fmt.Errorf("%s: giving up after %d tries and %s waiting: %w", op, tries, waited, err)
		}
		w.log.Debug("platform call failed; retrying", zap.String("op", op), zap.Int("attempt", attempt),
			zap.Duration("wait", wait), zap.String("outcome", errorKind(err)), zap.Error(err))
		if err := clock.Sleep(w.m.workCtx, w.clock, wait); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		waited += wait
	}
}

// observe reports one platform call's outcome to the manager's Observer.
func (w *worker) observe(op string, err error) {
	w.m.cfg.Observer.PlatformCall(w.key.channel, op, errorKind(err))
}

// backoff is the wait before try n+1 after a transient error: exponential,
// capped, with jitter in its upper half so chats do not retry in lockstep.
func (w *worker) backoff(n int) time.Duration {
	pol := w.m.cfg.Retry
	d := pol.BaseBackoff << min(n-1, 20)
	if d > pol.MaxBackoff || d <= 0 {
		d = pol.MaxBackoff
	}
	return d/2 + rand.N(d/2+1)
}
