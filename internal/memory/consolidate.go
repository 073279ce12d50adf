package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/history"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/usage"
)

// ToolName is the tool the model is forced to call
// (docs/memory.md#the-model-call).
const ToolName = "save_memory"

// Errors of a model answer that cannot be applied. Consolidate wraps them
// with the details; the caller counts them as a failed consolidation and
// tries again later.
var (
	// ErrNoCall: the model answered without calling save_memory.
	ErrNoCall = errors.New("the model did not call " + ToolName)
	// ErrBadArguments: save_memory was called with arguments that are not
	// JSON, miss a field, or would empty a non-empty MEMORY.md.
	ErrBadArguments = errors.New("the model called " + ToolName + " with unusable arguments")
)

// Model is what consolidation needs from the provider router.
type Model interface {
	// Complete runs one model call on route ("" for the default).
	Complete(ctx context.Context, route string, req llm.Request, onDelta func(llm.Delta)) (llm.Message, error)
	// ContextWindow is the route's context window in tokens.
	ContextWindow(route string) int
}

// Config tunes a Consolidator.
type Config struct {
	// MaxTokens caps the model's answer, which holds the whole new
	// MEMORY.md (agents.max_tokens, taken as given).
	MaxTokens int
	// MaxConflicts is how often one consolidation is redone because
	// MEMORY.md changed while the model worked [DefaultMaxConflicts].
	MaxConflicts int
	// Location is the time zone of HISTORY.md's timestamps [time.Local].
	Location *time.Location
	// Clock is the time of entries about messages without one
	// [clock.System].
	Clock clock.Clock
}

// DefaultMaxConflicts is how often one consolidation is redone because
// MEMORY.md changed under it. Not a config key: a user editing the file
// three times during one consolidation is rare, and the next turn retries.
const DefaultMaxConflicts = 3

func (c Config) withDefaults() Config {
	if c.MaxConflicts <= 0 {
		c.MaxConflicts = DefaultMaxConflicts
	}
	if c.Location == nil {
		c.Location = time.Local
	}
	if c.Clock == nil {
		c.Clock = clock.System{}
	}
	return c
}

// Consolidator folds conversation into the memory files. It is safe for
// concurrent use; see Files for how concurrent updates are kept apart.
type Consolidator struct {
	files *Files
	model Model
	cfg   Config
	log   *zap.Logger
}

// NewConsolidator returns a Consolidator writing files and asking model.
func NewConsolidator(files *Files, model Model, cfg Config, log *zap.Logger) *Consolidator {
	return &Consolidator{files: files, model: model, cfg: cfg.withDefaults(), log: log}
}

// Consolidate folds msgs, the older part of session key, into memory: the
// model (on route) gets the current MEMORY.md and a transcript of msgs and
// must call save_memory; its memory_update replaces MEMORY.md if it changed
// and its history_entry is appended to HISTORY.md. On any error nothing was
// written. When MEMORY.md changes while the model works, the call is redone
// on the new content (up to Config.MaxConflicts times) so that change is
// merged too.
func (c *Consolidator) Consolidate(ctx context.Context, route, key string, msgs []llm.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	// Its calls are the session's, counted as consolidation in the usage
	// ledger (and against budget.origins.consolidation).
	ctx = usage.WithCall(ctx, usage.Call{Origin: usage.OriginConsolidation, Session: key, Chat: usage.ChatOf(key)})
	for attempt := 1; ; attempt++ {
		base, err := c.files.Memory()
		if err != nil {
			return err
		}
		req := c.request(route, key, base, msgs)
		reply, err := c.model.Complete(ctx, route, req, nil)
		if err != nil {
			return fmt.Errorf("memory: consolidate %s: %w", key, err)
		}
		save, err := parseReply(reply, base)
		if err != nil {
			return fmt.Errorf("memory: consolidate %s: %w", key, err)
		}
		err = c.files.Commit(base, save.memory, c.stamp(save.entry, msgs))
		if errors.Is(err, ErrConflict) && attempt < c.cfg.MaxConflicts {
			c.log.Info("memory changed during consolidation; merging again", zap.String("session", key), zap.Int("attempt", attempt))
			continue
		}
		if err != nil {
			return fmt.Errorf("memory: consolidate %s: %w", key, err)
		}
		c.log.Debug("memory consolidated", zap.String("session", key), zap.Int("messages", len(msgs)),
			zap.Bool("memory_changed", save.memory != base))
		return nil
	}
}

// Dump appends msgs to HISTORY.md as a dated, readable transcript without
// asking the model: the way out when consolidation keeps failing, so that
// nothing is lost and the session can move on. cause says why, for the reader.
func (c *Consolidator) Dump(key string, msgs []llm.Message, cause error) error {
	if len(msgs) == 0 {
		return nil
	}
	first, last := span(msgs)
	if first.IsZero() {
		first, last = c.cfg.Clock.Now(), c.cfg.Clock.Now()
	}
	why := "memory consolidation failed"
	if cause != nil {
		why += " (" + strings.TrimPrefix(firstLine(cause.Error()), "memory: consolidate "+key+": ") + ")"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[%s] %d messages of session %s, %s to %s, saved as a transcript (tool output shortened) because %s:\n",
		first.In(c.cfg.Location).Format(stampLayout), len(msgs), key,
		first.In(c.cfg.Location).Format(stampLayout), last.In(c.cfg.Location).Format(stampLayout), why)
	b.WriteString(transcript(msgs, transcriptOptions{level: llm.Summary, loc: c.cfg.Location}))
	if err := c.files.AppendHistory(b.String()); err != nil {
		return fmt.Errorf("memory: dump %s: %w", key, err)
	}
	c.log.Warn("session part saved to history as a raw transcript", zap.String("session", key), zap.Int("messages", len(msgs)))
	return nil
}

// systemPrompt tells the model what the two files are and how to update them.
const systemPrompt = `You keep the long-term memory of nanobot, a personal AI assistant. You fold a finished part of a conversation into two files:

- MEMORY.md holds lasting facts in Markdown and is shown to the assistant in every future conversation: who the user is, their preferences, people, places, projects, decisions, commitments and things to remember.
- HISTORY.md is an append-only log, one paragraph per entry, that the assistant searches with grep when the user refers to the past.

Call the save_memory tool exactly once, with:
- history_entry: one paragraph of 2 to 5 sentences on what happened in this part of the conversation: topics, decisions, results, open items. Start it with the time of the part's first message as [YYYY-MM-DD HH:MM]. Name people, places, files, dates and numbers so that a search finds them.
- memory_update: the complete new MEMORY.md. Start from the current MEMORY.md and keep every fact in it that is still true, in its structure and headings; add the lasting facts this conversation taught; correct the facts it changed. Leave out small talk, passing details and what was only true for the moment. If nothing new is worth keeping, return the current MEMORY.md unchanged.

Write in the language the user writes in.`

// toolSpec is save_memory's definition.
var toolSpec = llm.ToolSpec{
	Name:        ToolName,
	Description: "Save the consolidated memory: a history entry for HISTORY.md and the complete new MEMORY.md.",
	Parameters: json.RawMessage(`{"type":"object","properties":{` +
		`"history_entry":{"type":"string","description":"One paragraph (2-5 sentences) summarising this part of the conversation, starting with [YYYY-MM-DD HH:MM]. Include details that make it easy to find with grep."},` +
		`"memory_update":{"type":"string","description":"The complete updated MEMORY.md in Markdown: every still-true fact of the current memory plus the new ones. Return it unchanged if nothing new is worth keeping."}` +
		`},"required":["history_entry","memory_update"]}`),
}

// request builds the forced save_memory call. The transcript shows tool
// results shortened (Summary); if even that does not fit the route's
// context window, tool results shrink to one line and long texts are cut.
func (c *Consolidator) request(route, key, memory string, msgs []llm.Message) llm.Request {
	budget := c.model.ContextWindow(route) - c.cfg.MaxTokens - history.EstimateText(systemPrompt) - history.EstimateText(memory) - 500
	var text string
	for _, opt := range []transcriptOptions{
		{level: llm.Summary},
		{level: llm.Gist},
		{level: llm.Gist, maxText: 2000},
	} {
		opt.loc = c.cfg.Location
		text = transcript(msgs, opt)
		if history.EstimateText(text) <= budget {
			break
		}
	}
	var b strings.Builder
	b.WriteString("## Current MEMORY.md\n\n")
	if strings.TrimSpace(memory) == "" {
		b.WriteString("(empty)\n")
	} else {
		b.WriteString(memory)
		if !strings.HasSuffix(memory, "\n") {
			b.WriteByte('\n')
		}
	}
	first, last := span(msgs)
	fmt.Fprintf(&b, "\n## Conversation to fold in\n\nSession %s, %d messages", key, len(msgs))
	if !first.IsZero() {
		fmt.Fprintf(&b, " from %s to %s", first.In(c.cfg.Location).Format(stampLayout), last.In(c.cfg.Location).Format(stampLayout))
	}
	b.WriteString(":\n\n")
	b.WriteString(text)
	b.WriteString("\n\nNow call save_memory.")
	return llm.Request{
		System:    systemPrompt,
		Messages:  []llm.Message{llm.NewText(llm.RoleUser, b.String())},
		Tools:     []llm.ToolSpec{toolSpec},
		ForceTool: ToolName,
		MaxTokens: c.cfg.MaxTokens,
	}
}

// saved is a checked save_memory call.
type saved struct {
	entry, memory string
}

// parseReply finds the save_memory call in reply and checks its arguments.
func parseReply(reply llm.Message, base string) (saved, error) {
	var call *llm.ToolCall
	for _, c := range reply.ToolCalls() {
		if c.Name == ToolName {
			call = &c
			break
		}
	}
	if call == nil {
		return saved{}, ErrNoCall
	}
	if call.ParseError != "" {
		return saved{}, fmt.Errorf("%w: not JSON (%s)", ErrBadArguments, call.ParseError)
	}
	var args struct {
		HistoryEntry *string `json:"history_entry"`
		MemoryUpdate *string `json:"memory_update"`
	}
	if err := json.Unmarshal(call.Arguments, &args); err != nil {
		return saved{}, fmt.Errorf("%w: %v", ErrBadArguments, err)
	}
	switch {
	case args.HistoryEntry == nil || strings.TrimSpace(*args.HistoryEntry) == "":
		return saved{}, fmt.Errorf("%w: history_entry is missing or empty", ErrBadArguments)
	case args.MemoryUpdate == nil:
		return saved{}, fmt.Errorf("%w: memory_update is missing", ErrBadArguments)
	case strings.TrimSpace(*args.MemoryUpdate) == "" && strings.TrimSpace(base) != "":
		// Wiping the memory is never what a merge means; refuse rather
		// than lose every fact.
		return saved{}, fmt.Errorf("%w: memory_update is empty but MEMORY.md is not", ErrBadArguments)
	}
	memory := *args.MemoryUpdate
	if strings.TrimSpace(memory) == strings.TrimSpace(base) {
		memory = base // unchanged up to white space: do not touch the file
	} else {
		memory = strings.TrimRight(memory, " \t\r\n") + "\n"
	}
	return saved{entry: *args.HistoryEntry, memory: memory}, nil
}

// stampPattern is the timestamp an entry must start with. It is compiled on
// the first consolidation, not at start.
var stampPattern = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}\]`)
})

// blankLines separate paragraphs; inside an entry they would split it.
var blankLines = regexp.MustCompile(`\n[ \t\r]*\n\s*`)

// stamp makes entry one paragraph that starts with a timestamp, adding the
// time of the part's first message when the model left it out.
func (c *Consolidator) stamp(entry string, msgs []llm.Message) string {
	entry = blankLines.ReplaceAllString(strings.TrimSpace(entry), "\n")
	if stampPattern().MatchString(entry) {
		return entry
	}
	first, _ := span(msgs)
	if first.IsZero() {
		first = c.cfg.Clock.Now()
	}
	return "[" + first.In(c.cfg.Location).Format(stampLayout) + "] " + entry
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
