package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/history"
	"github.com/nanobot-go/nanobot/internal/inbox"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/logging"
	"github.com/nanobot-go/nanobot/internal/session"
	"github.com/nanobot-go/nanobot/internal/tools"
	"github.com/nanobot-go/nanobot/internal/usage"
)

// turn is the state of one turn: the messages it produced so far (not yet
// persisted) and what it will say at the end.
type turn struct {
	id     string
	key    string
	origin bus.InboundMessage
	// store holds the session: the agent's, or for an ephemeral turn one
	// in memory that ends with the turn.
	store Sessions
	log   *zap.Logger
	msgs  []llm.Message
	// callIDs are the tool call ids used in this turn, to keep them unique.
	callIDs map[string]bool
	// sent holds what the message tool sent to this chat in this turn, so
	// a final text that only repeats it is not sent twice
	// (docs/reliability.md#every-turn-ends-with-something-to-read).
	sent []string
}

// runTurn answers one user turn (one message, or several that arrived while
// the session was busy) with the model-and-tools loop
// (docs/architecture.md#one-message-end-to-end). The batch is acknowledged
// once the turn's final message is delivered; a turn cut short by shutdown is
// not, so a channel that redelivers brings it back after the restart, and the
// turn resumes (see replay.go).
//
// afterStop says /stop cut the session's previous turn short; the model is
// told, so it does not answer as if the stopped question were still open.
func (a *Agent) runTurn(ctx context.Context, key string, batch []bus.InboundMessage, afterStop bool) {
	origin := batch[len(batch)-1]
	t := &turn{id: newTurnID(), key: key, origin: origin, store: a.store, callIDs: map[string]bool{}}
	if origin.Ephemeral {
		t.store = newMemSessions(key)
	}
	fields := []zap.Field{zap.String("turn", t.id), zap.String("session", key)}
	t.log = a.log.With(fields...)
	// The router, providers and tools log through their own loggers; the
	// context carries the turn id to their lines.
	ctx = logging.WithFields(ctx, fields...)
	ctx = usage.WithCall(ctx, turnCall(origin, key))
	start := a.now()
	a.publish(ctx, a.outbound(t, bus.KindStart, ""))
	final := bus.OutboundMessage{}
	ack := true
	outcome := OutcomeAnswered
	defer func() {
		if final.Kind != bus.KindFinal {
			final = a.outbound(t, bus.KindFinal, "")
		}
		if ack {
			final.Delivered = func() {
				for _, m := range batch {
					a.ack(m)
				}
			}
		}
		final.Usage = t.usage()
		a.publish(ctx, final)
		elapsed := a.now().Sub(start)
		a.obs.TurnDone(outcome, elapsed)
		t.log.Info("turn done", zap.String("outcome", outcome), zap.Duration("elapsed", elapsed), zap.Int("messages", len(t.msgs)))
	}()

	snap, err := t.store.Get(key)
	if err != nil {
		t.log.Error("load session", zap.Error(err))
		outcome = OutcomeFailed
		final = a.failure(t, "I could not read this chat's history, so I did not answer. The operator should check the daemon log.")
		return
	}
	if snap.Footer {
		a.spend.start(key)
		defer a.spend.end(key)
	}
	fresh, replays := classify(snap.Messages, batch)
	resume := a.replayed(ctx, t, replays)
	if len(fresh) == 0 && !resume {
		return // every message was answered before; nothing more to say
	}
	if len(fresh) > 0 {
		user, err := a.userMessage(fresh, afterStop)
		if err != nil {
			t.log.Error("prepare user message", zap.Error(err))
		}
		msgs := []llm.Message{user}
		if len(snap.Messages) == 0 && len(origin.History) > 0 {
			// A new session takes the conversation the sender re-sent; a
			// session with messages is the record and the re-sent copy is
			// ignored.
			msgs = append(seed(origin.History), user)
		}
		// Not fsync'd yet: the channel keeps the message until the turn is
		// answered, and persist's fsync covers it before the answer goes
		// out — one fsync a turn instead of two.
		snap, err = t.store.Stage(key, msgs...)
		if err != nil {
			t.log.Error("persist user message", zap.Error(err))
			outcome = OutcomeFailed
			final = a.failure(t, "I could not save your message, so I did not answer it. Please try again; the operator should check the daemon log (disk full?).")
			return
		}
	}

	answer, err := a.loop(ctx, t, snap.Messages[snap.Consolidated:], textsOf(snap), a.routeFor(t, snap))
	if perr := a.persist(t); perr != nil {
		t.log.Error("persist turn", zap.Error(perr))
		if err == nil {
			err = perr
		}
	}
	switch {
	case ctx.Err() != nil && stopped(ctx):
		outcome = OutcomeStopped
		t.log.Info("turn stopped by the user")
		return
	case ctx.Err() != nil && redelivers(batch):
		// Not acknowledged: the channel brings the message back after the
		// restart and the turn resumes there.
		outcome = OutcomeInterrupted
		t.log.Info("turn cut by shutdown; it resumes after the restart")
		ack = false
		return
	case ctx.Err() != nil:
		// The user message and every complete step are saved; say so rather
		// than leave the chat silent.
		outcome = OutcomeInterrupted
		t.log.Warn("turn cut by shutdown")
		final = a.failure(t, interruptedNotice)
		return
	case err != nil:
		outcome = OutcomeFailed
		t.log.Error("turn failed", zap.Error(err))
		final = a.failure(t, llm.Classify(err).UserText())
		return
	}
	// The final text goes out even after the message tool sent a progress
	// note; only a repetition of what it sent is left out
	// (docs/reliability.md#every-turn-ends-with-something-to-read). A cut or
	// withheld answer says so
	// (docs/reliability.md#every-turn-ends-with-something-to-read).
	text := answerText(answer, t.sent)
	if snap.Footer && text != "" {
		text += footer(a.spend.end(key))
	}
	final = a.outbound(t, bus.KindFinal, text)
	final.Stop = answer.Stop()
}

// replayed handles the redelivered messages of a batch: recorded answers
// are sent again, and it reports whether an unfinished turn is to be
// resumed (its tool call ids then stay reserved).
func (a *Agent) replayed(ctx context.Context, t *turn, replays []replay) (resume bool) {
	for _, r := range replays {
		switch r.kind {
		case answered:
			t.log.Info("redelivered message was answered before; sending the answer again", zap.String("message", r.msg.MessageID))
			if strings.TrimSpace(r.answer) != "" {
				a.notify(ctx, r.msg, r.answer, false)
			}
		case superseded:
			t.log.Info("redelivered message was taken up by a later turn", zap.String("message", r.msg.MessageID))
		case unfinished:
			t.log.Info("resuming a turn a restart interrupted", zap.String("message", r.msg.MessageID))
			for _, id := range r.callIDs {
				t.callIDs[id] = true
			}
			resume = true
		}
	}
	return resume
}

// errStopped is the cancellation cause of a turn ended by /stop, which,
// unlike a shutdown, settles its messages for good.
var errStopped = errors.New("stopped by the user")

func stopped(ctx context.Context) bool { return errors.Is(context.Cause(ctx), errStopped) }

// interruptedNotice is what a user whose turn was cut by shutdown reads when
// the channel will not bring the message back by itself.
const interruptedNotice = "⚠️ I had to stop before I finished answering: I am being restarted. " +
	"Your message is saved; send “continue” in a moment and I will pick up where I left off."

// cancelled names why a turn's context ended: /stop, or shutdown.
func cancelled(ctx context.Context) string {
	if stopped(ctx) {
		return OutcomeStopped
	}
	return OutcomeInterrupted
}

// loop calls the model and runs tools until the model answers without tool
// calls or the iteration cap is hit, and returns that answer. stored is the
// persisted history the turn continues (its user message last).
func (a *Agent) loop(ctx context.Context, t *turn, stored []llm.Message, texts *history.Texts, route string) (llm.Message, error) {
	system, systemTokens, err := a.prompt.BuildEstimated()
	if err != nil {
		return llm.Message{}, fmt.Errorf("build system prompt: %w", err)
	}
	all := a.tools.Specs()
	specs := t.specsFor(all)
	toolTokens := a.toolTokens.of(all)
	if len(specs) != len(all) {
		// A one-off turn's smaller list is a new slice every time: no use
		// remembering its estimate.
		toolTokens = specTokens(specs)
	}
	draft := &drafter{a: a, t: t, ctx: ctx}
	for iter := 0; iter < a.cfg.MaxToolIterations; iter++ {
		req := llm.Request{
			System: system, Tools: specs, MaxTokens: a.cfg.MaxTokens, Temperature: a.cfg.Temperature,
			// Projected for the route the router tries, each fallback
			// for its own window (docs/routing.md#routes).
			Fit: a.fit(toolTokens, func(opt history.Options) []llm.Message {
				return a.resolveImages(texts.Project(system, stored, t.msgs, opt).Messages)
			}, systemTokens),
			// After the message tool answered, an answer of nothing is a
			// fine end, not a failure to ask again
			// (docs/reliability.md#every-turn-ends-with-something-to-read).
			EmptyOK: len(t.sent) > 0,
		}
		// The cap is on model calls, not whole turns: a turn waiting for a
		// slow tool or the disk does not keep another chat from the model.
		var msg llm.Message
		err := a.withSlot(ctx, t.origin.Group, func() (err error) {
			if iter == 0 {
				// Admitted holding a model slot, against the spend the
				// calls before it recorded: the turns in flight are what
				// can pass a limit together.
				ctx = a.admit(ctx)
				draft.ctx = ctx
			}
			msg, err = a.model.Complete(ctx, route, req, draft.observe)
			return err
		})
		if err == nil {
			// The router refuses these already; a Model that does not
			// must not make the agent save an empty answer
			// (docs/reliability.md#every-turn-ends-with-something-to-read).
			err = req.Check(msg)
		}
		if err != nil {
			return llm.Message{}, err
		}
		msg = keepable(msg)
		msg.Time = a.now()
		t.uniqueCallIDs(&msg, iter)
		if len(msg.Parts) > 0 { // an empty end after the message tool leaves no record
			t.msgs = append(t.msgs, msg)
		}
		calls := msg.ToolCalls()
		if len(calls) == 0 {
			return msg, nil
		}
		draft.flushFinal()
		results := a.runTools(ctx, t, calls)
		t.msgs = append(t.msgs, results)
		if err := ctx.Err(); err != nil {
			return llm.Message{}, err
		}
	}
	t.log.Warn("tool iteration limit reached", zap.Int("limit", a.cfg.MaxToolIterations))
	note := fmt.Sprintf("I stopped after %d tool steps without reaching an answer. Tell me how to continue, or narrow the task down.", a.cfg.MaxToolIterations)
	msg := llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text(note)}, Time: a.now(), Meta: &llm.Meta{Synthetic: true}}
	t.msgs = append(t.msgs, msg)
	return msg, nil
}

// persist writes the turn's messages with one append, fsync'd with the
// user message staged before the loop; only complete call/result pairs exist
// in t.msgs, so a cancelled turn leaves a valid history.
func (a *Agent) persist(t *turn) error {
	if len(t.msgs) == 0 {
		return t.store.Sync(t.key)
	}
	_, err := t.store.Append(t.key, t.msgs...)
	return err
}

// runTools executes one model turn's calls and returns one tool message with
// their results in call order (docs/history.md#projection). Read-only calls
// run in parallel when every call of the batch is read-only.
func (a *Agent) runTools(ctx context.Context, t *turn, calls []llm.ToolCall) llm.Message {
	origin := tools.Origin{
		Channel: t.origin.Channel, ChatID: t.origin.ChatID, SenderID: t.origin.SenderID,
		SessionKey: t.key, TurnID: t.id, MessageID: t.origin.MessageID, Group: t.origin.Group, Metadata: t.origin.Metadata,
	}
	a.publish(ctx, a.outbound(t, bus.KindStatus, toolHint(calls)))
	results := make([]llm.ToolResult, len(calls))
	if a.parallel(calls) {
		var wg sync.WaitGroup
		for i, c := range calls {
			wg.Go(func() { results[i] = a.execute(ctx, t, c, origin) })
		}
		wg.Wait()
	} else {
		for i, c := range calls {
			results[i] = a.execute(ctx, t, c, origin)
		}
	}
	msg := llm.Message{Role: llm.RoleTool, Time: a.now(), Parts: make([]llm.Part, len(calls))}
	for i, r := range results {
		r.ToolCallID, r.Name = calls[i].ID, calls[i].Name
		r.Content = history.Detail(calls[i], r) // LOD renderings, written once (docs/history.md#levels-of-detail)
		t.log.Debug("tool call", zap.String("tool", r.Name), zap.Bool("error", r.IsError), zap.Duration("elapsed", r.Elapsed))
		if tools.SentToCurrentChat(calls[i], r, origin) {
			t.sent = append(t.sent, messageContent(calls[i]))
		}
		msg.Parts[i] = llm.Part{Kind: llm.PartToolResult, Result: &r}
	}
	return msg
}

func (a *Agent) parallel(calls []llm.ToolCall) bool {
	ro, ok := a.tools.(readOnlyTools)
	if !ok || len(calls) < 2 {
		return false
	}
	for _, c := range calls {
		if !ro.ReadOnly(c.Name) || c.ParseError != "" {
			return false
		}
	}
	return true
}

// uniqueCallIDs renames tool call ids that repeat an id used earlier in the
// turn (some OpenAI-compatible servers number calls from 0 every time).
func (t *turn) uniqueCallIDs(m *llm.Message, iter int) {
	for i := range m.Parts {
		c := m.Parts[i].Call
		if c == nil {
			continue
		}
		if t.callIDs[c.ID] {
			renamed := *c
			renamed.ID = fmt.Sprintf("%s_%d", c.ID, iter)
			m.Parts[i].Call = &renamed
		}
		t.callIDs[m.Parts[i].Call.ID] = true
	}
}

// userMessage merges the batch into one user message with a context prefix
// (time, channel and chat go here, not in the system prompt; see
// README.md#the-workspace). A batch written by several people keeps each
// message's author and time (see attribution.go). Inline image data is saved
// in the workspace inbox so the session stores a path, except in a one-off
// turn, which keeps it in memory (see keepImage).
func (a *Agent) userMessage(batch []bus.InboundMessage, afterStop bool) (llm.Message, error) {
	last := batch[len(batch)-1]
	var b strings.Builder
	now := a.now()
	authors := authorsOf(batch)
	fmt.Fprintf(&b, "[%s · %s · chat %s", now.Format("Mon 2006-01-02 15:04 MST"), last.Channel, last.ChatID)
	if authors.one() {
		if name := senderOf(last).name; name != "" {
			fmt.Fprintf(&b, " · from %s", name)
		}
	} else {
		fmt.Fprintf(&b, " · %d messages from %d people, oldest first", len(batch), authors.count())
	}
	b.WriteString("]")
	if afterStop {
		b.WriteString("\n" + stoppedNote)
	}
	msg := llm.Message{Role: llm.RoleUser, Time: now}
	for _, m := range batch {
		if m.MessageID != "" {
			if msg.Meta == nil {
				msg.Meta = &llm.Meta{}
			}
			msg.Meta.MessageIDs = append(msg.Meta.MessageIDs, m.MessageID)
		}
	}
	var errs []error
	for _, m := range batch {
		content := m.Content
		if !authors.one() {
			b.WriteString("\n")
			b.WriteString(authors.header(m, now))
		}
		if note := lateNote(m, now); note != "" {
			b.WriteString("\n")
			b.WriteString(note)
		}
		if n := len([]rune(content)); n > a.cfg.MaxInputChars {
			content = string([]rune(content)[:a.cfg.MaxInputChars]) +
				fmt.Sprintf("\n[… message cut: it was %d characters, the limit is %d]", n, a.cfg.MaxInputChars)
		}
		b.WriteString("\n")
		b.WriteString(content)
		for _, p := range m.Media {
			if p.Kind == llm.PartImage && p.Image != nil && len(p.Image.Data) > 0 && p.Image.Path == "" {
				kept, err := a.keepImage(p.Image, m.Ephemeral)
				if err != nil {
					errs = append(errs, err)
					b.WriteString("\n" + droppedImageNote(err))
					continue
				}
				p = llm.Part{Kind: llm.PartImage, Image: kept}
			}
			if (llm.Message{Role: llm.RoleUser, Parts: []llm.Part{p}}).Validate() == nil {
				msg.Parts = append(msg.Parts, p)
			}
		}
	}
	text := llm.Text(b.String())
	text.Summary, text.Gist = history.DetailText(text.Text) // large inputs get LOD renderings too
	msg.Parts = append([]llm.Part{text}, msg.Parts...)
	return msg, errors.Join(errs...)
}

// stoppedNote tells the model that the user stopped its previous answer
// with /stop: what follows is what they sent while it ran.
const stoppedNote = "[the user stopped your previous answer with /stop before it was finished]"

// lateAfter is how old a message may be when its turn starts before the
// model is told its answer comes late.
const lateAfter = 5 * time.Minute

// lateNote tells the model that m was sent a while ago: a message the
// platform kept while the daemon was down (Telegram keeps updates for a
// day; Discord's are fetched when it reconnects), or one that waited
// behind a long turn. Without it the model would answer as if the
// question had just been asked. Messages the program made itself (jobs,
// subagent results) carry their own wording.
func lateNote(m bus.InboundMessage, now time.Time) string {
	if m.Time.IsZero() || m.Metadata[MetaSource] != "" {
		return ""
	}
	age := now.Sub(m.Time)
	if age < lateAfter {
		return ""
	}
	return fmt.Sprintf("[sent %s ago, at %s; this answer comes late]", roughAge(age), m.Time.In(now.Location()).Format("Mon 2006-01-02 15:04 MST"))
}

// roughAge writes d the way a person would: "7m", "3h12m", "2d4h".
func roughAge(d time.Duration) string {
	switch {
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd%dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
}

// keepImage checks that inline image bytes are a picture (by their content:
// the MIME type a sender declared is ignored) and returns the image the
// turn keeps. A session's turn saves it through the inbox writer, under a
// name and extension the daemon chooses, so sessions hold a path and never
// base64 blobs. A one-off turn writes nothing anywhere: it keeps the bytes
// in memory, and they go with the turn.
func (a *Agent) keepImage(img *llm.Image, ephemeral bool) (*llm.Image, error) {
	if ephemeral {
		mime, err := inbox.SniffImage(img.Data)
		if err != nil {
			return nil, fmt.Errorf("inline image: %w", err)
		}
		return &llm.Image{MIME: mime, Data: img.Data}, nil
	}
	rel, mime, err := inbox.SaveImage(a.cfg.Workspace, img.Data, a.now())
	if err != nil {
		return nil, fmt.Errorf("save image: %w", err)
	}
	return &llm.Image{MIME: mime, Path: rel}, nil
}

// droppedImageNote tells the model why a picture the user sent is missing.
func droppedImageNote(err error) string {
	if errors.Is(err, inbox.ErrNotImage) {
		return "[an attached image was dropped: it is not a PNG, JPEG, GIF or WebP picture]"
	}
	return "[an attached image could not be saved, so it is missing here]"
}

// maxImageBytes caps an image loaded from the workspace for a model call.
const maxImageBytes = 10 << 20

// resolveImages loads the images of the newest user message from the
// workspace; images of older messages become a short text note, so a
// picture is paid for once, not on every later turn.
func (a *Agent) resolveImages(msgs []llm.Message) []llm.Message {
	lastUser := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == llm.RoleUser {
			lastUser = i
			break
		}
	}
	var out []llm.Message
	for i, m := range msgs {
		if m.Role != llm.RoleUser || !hasPathImage(m) {
			continue
		}
		if out == nil {
			out = append([]llm.Message(nil), msgs...)
		}
		parts := make([]llm.Part, 0, len(m.Parts))
		for _, p := range m.Parts {
			if p.Kind != llm.PartImage || p.Image.Path == "" {
				parts = append(parts, p)
				continue
			}
			if i == lastUser {
				data, err := inbox.ReadFile(a.cfg.Workspace, p.Image.Path, maxImageBytes)
				if err == nil {
					parts = append(parts, llm.Part{Kind: llm.PartImage, Image: &llm.Image{MIME: p.Image.MIME, Data: data}})
					continue
				}
				a.log.Warn("image unavailable", zap.String("path", p.Image.Path), zap.Error(err))
			}
			parts = append(parts, llm.Text(fmt.Sprintf("[image: %s]", p.Image.Path)))
		}
		out[i].Parts = parts
	}
	if out == nil {
		return msgs
	}
	return out
}

func hasPathImage(m llm.Message) bool {
	for _, p := range m.Parts {
		if p.Kind == llm.PartImage && p.Image != nil && p.Image.Path != "" {
			return true
		}
	}
	return false
}

func (a *Agent) outbound(t *turn, kind bus.Kind, content string) bus.OutboundMessage {
	return bus.OutboundMessage{
		Channel: t.origin.Channel, ChatID: t.origin.ChatID, Kind: kind, Content: content,
		ReplyTo: t.origin.MessageID, TurnID: t.id, Metadata: t.origin.Metadata,
	}
}

func (a *Agent) failure(t *turn, text string) bus.OutboundMessage {
	m := a.outbound(t, bus.KindFinal, a.redact(text))
	m.IsError = true
	return m
}

// toolHint is the status line shown while tools run: `read_file notes.md`.
func toolHint(calls []llm.ToolCall) string {
	hints := make([]string, 0, len(calls))
	for _, c := range calls {
		h := "🔧 " + c.Name
		if arg := firstArg(c); arg != "" {
			h += " " + arg
		}
		hints = append(hints, h)
	}
	return strings.Join(hints, "\n")
}

// firstArg is the first string argument of a call, shortened, for hints.
func firstArg(c llm.ToolCall) string {
	s := string(c.Arguments)
	i := strings.Index(s, `":"`)
	if i < 0 {
		return ""
	}
	s = s[i+3:]
	if j := strings.IndexByte(s, '"'); j >= 0 {
		s = s[:j]
	}
	if r := []rune(s); len(r) > 40 {
		s = string(r[:39]) + "…"
	}
	return s
}

func specTokens(specs []llm.ToolSpec) int {
	n := 0
	for _, s := range specs {
		n += history.EstimateText(s.Name) + history.EstimateText(s.Description) + (len(s.Parameters)+3)/4 + 8
	}
	return n
}

// textsKey is the key of the session's estimate cache in Snapshot.Memo.
type textsKey struct{}

// textsOf returns the cache of the token estimates of snap's stored texts,
// kept with the loaded session (see session.Snapshot.Memo), or nil.
func textsOf(snap session.Snapshot) *history.Texts {
	if snap.Memo == nil {
		return nil
	}
	if v, ok := snap.Memo.Load(textsKey{}); ok {
		return v.(*history.Texts)
	}
	v, _ := snap.Memo.LoadOrStore(textsKey{}, new(history.Texts))
	return v.(*history.Texts)
}

// specMemo remembers specTokens of the last tool list it was given, keyed
// on the slice itself: the registry returns the same slice until a tool
// comes or goes (tools.Registry.Specs), so the estimate is made once per
// change instead of once per turn. Holding the slice keeps its array alive,
// so a different list can never reuse its address.
type specMemo struct {
	last atomic.Pointer[specEstimate]
}

type specEstimate struct {
	specs  []llm.ToolSpec
	tokens int
}

// of returns specTokens(specs).
func (m *specMemo) of(specs []llm.ToolSpec) int {
	if e := m.last.Load(); e != nil && sameSlice(e.specs, specs) {
		return e.tokens
	}
	n := specTokens(specs)
	m.last.Store(&specEstimate{specs: specs, tokens: n})
	return n
}

// sameSlice reports whether a and b are the same slice: the same array and
// length.
func sameSlice(a, b []llm.ToolSpec) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// drafter publishes the growing reply as drafts, at most once per
// DraftInterval, so a fast stream does not flood the bus.
type drafter struct {
	a    *Agent
	t    *turn
	ctx  context.Context
	text strings.Builder
	last time.Time
	sent int // length of text last published
}

func (d *drafter) observe(delta llm.Delta) {
	switch delta.Kind {
	case llm.DeltaStart:
		d.text.Reset() // a new call (or a retry) starts a new draft
		d.sent = 0
	case llm.DeltaText:
		d.text.WriteString(delta.Text)
		if now := d.a.now(); now.Sub(d.last) >= d.a.cfg.DraftInterval {
			d.publish(now)
		}
	}
}

// flushFinal publishes the last draft text of a call that is followed by
// tools, so the user sees what the model said before it acts.
func (d *drafter) flushFinal() {
	if d.text.Len() != d.sent {
		d.publish(d.a.now())
	}
}

func (d *drafter) publish(now time.Time) {
	if d.text.Len() == 0 {
		return
	}
	d.last = now
	d.sent = d.text.Len()
	d.a.publish(d.ctx, d.a.outbound(d.t, bus.KindDraft, d.text.String()))
}

// redelivers reports whether the batch's channel brings unacknowledged
// messages back after a restart (it asked for acknowledgements).
func redelivers(batch []bus.InboundMessage) bool {
	for _, m := range batch {
		if m.Ack != nil {
			return true
		}
	}
	return false
}
