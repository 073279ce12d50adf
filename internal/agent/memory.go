package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/history"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/session"
)

// Memory folds the older part of a session into long-term memory
// (internal/memory implements it).
type Memory interface {
	// Consolidate asks the model on route to fold msgs of session key into
	// MEMORY.md and HISTORY.md. On error nothing was written.
	Consolidate(ctx context.Context, route, key string, msgs []llm.Message) error
	// Dump appends msgs to HISTORY.md as a raw transcript, without the
	// model; used after repeated failures so nothing is lost.
	Dump(key string, msgs []llm.Message, cause error) error
}

// maxMemoryBackoff caps the wait between two failed consolidations.
const maxMemoryBackoff = time.Hour

// consolidation is what one consolidation run did.
type consolidation uint8

const (
	consolidatedNothing consolidation = iota // nothing to fold in
	consolidatedModel                        // the model's summary was saved
	consolidatedDump                         // saved as a raw transcript after repeated failures
)

// memoryStates tracks, per session, the consolidation lock and the failures
// since the last success. An entry lives while someone holds or waits for
// its lock or while it remembers failures, so the map does not grow with
// the number of sessions ever seen.
type memoryStates struct {
	mu sync.Mutex
	m  map[string]*memoryState
}

type memoryState struct {
	// lock is held (a value in the 1-slot channel) while a consolidation of
	// the session runs: never two at once (docs/memory.md#when).
	lock chan struct{}
	// The fields below are guarded by memoryStates.mu.
	users    int
	failures int
	retryAt  time.Time
	lastErr  error
}

// acquire takes key's consolidation lock. With wait it blocks until the
// lock is free or ctx ends; without, it gives up at once if it is taken.
func (s *memoryStates) acquire(ctx context.Context, key string, wait bool) (*memoryState, bool) {
	s.mu.Lock()
	if s.m == nil {
		s.m = map[string]*memoryState{}
	}
	st, ok := s.m[key]
	if !ok {
		st = &memoryState{lock: make(chan struct{}, 1)}
		s.m[key] = st
	}
	st.users++
	s.mu.Unlock()
	if wait {
		select {
		case st.lock <- struct{}{}:
			return st, true
		case <-ctx.Done():
		}
	} else {
		select {
		case st.lock <- struct{}{}:
			return st, true
		default:
		}
	}
	s.forget(key, st)
	return nil, false
}

// release gives the lock back.
func (s *memoryStates) release(key string, st *memoryState) {
	<-st.lock
	s.forget(key, st)
}

// forget drops one user of st and the entry itself once nobody uses it and
// it holds no failures.
func (s *memoryStates) forget(key string, st *memoryState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st.users--
	if st.users == 0 && st.failures == 0 {
		delete(s.m, key)
	}
}

// status reports key's failures, for /status.
func (s *memoryStates) status(key string) (running bool, failures int, retryAt time.Time, lastErr error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.m[key]
	if !ok {
		return false, 0, time.Time{}, nil
	}
	return len(st.lock) > 0, st.failures, st.retryAt, st.lastErr
}

// afterTurn starts a background consolidation of the session when its
// unconsolidated part has grown past the memory window or its share of the
// context window (docs/memory.md#when). It never waits: the reply is already
// out, a consolidation of the session already running will be followed by
// another check after the next turn, and a failed one waits out its backoff.
func (a *Agent) afterTurn(ctx context.Context, key string) {
	if a.memory == nil || ctx.Err() != nil {
		return
	}
	snap, err := a.store.Get(key)
	if err != nil || !a.needsConsolidation(snap) || cutPoint(snap.Messages, snap.Consolidated) <= snap.Consolidated {
		return // nothing to do, or one long turn that cannot be cut yet
	}
	st, ok := a.mem.acquire(ctx, key, false)
	if !ok {
		return
	}
	a.mem.mu.Lock()
	wait := st.retryAt.After(a.now())
	a.mem.mu.Unlock()
	if wait {
		a.mem.release(key, st)
		return
	}
	a.wg.Go(func() {
		defer a.mem.release(key, st)
		// A long backlog (an old session, a chat that was busy while the
		// model failed) is folded in part after part until the session is
		// back under its window, not one part per turn.
		for ctx.Err() == nil {
			done, err := a.consolidate(ctx, key, st, false)
			if err != nil {
				if ctx.Err() == nil {
					a.log.Warn("memory consolidation failed; will retry", zap.String("session", key), zap.Error(err))
				}
				return
			}
			snap, err := a.store.Get(key)
			if done == consolidatedNothing || err != nil || !a.needsConsolidation(snap) {
				return
			}
		}
	})
}

// needsConsolidation applies the two consolidation triggers
// (docs/memory.md#when) to the session.
func (a *Agent) needsConsolidation(snap session.Snapshot) bool {
	if len(snap.Unconsolidated()) > a.cfg.MemoryWindow {
		return true
	}
	tokens := a.tallies.tokens(snap)
	return float64(tokens) > a.cfg.MemoryShare*float64(a.model.ContextWindow(a.routeOf(snap)))
}

// maxTallies bounds the token tallies kept; beyond it they are all dropped
// and rebuilt as sessions take turns, so memory stays bounded however many
// chats the daemon sees over months.
const maxTallies = 4096

// tallies caches the token estimate of each session's unconsolidated part,
// so the check after a turn costs what the turn added rather than the whole
// part (see BenchmarkNeedsConsolidation).
type tallies struct {
	mu sync.Mutex
	m  map[string]tally
}

// tally is the estimate n of Messages[from:to] of the session file created
// at created (a session archived by /new starts a new file).
type tally struct {
	created     time.Time
	from, to, n int
}

// forget drops key's tally (its session was archived).
func (t *tallies) forget(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, key)
}

// tokens returns the estimate of snap's unconsolidated part, counting only
// the messages added since the last call for the same session file and offset.
func (t *tallies) tokens(snap session.Snapshot) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.m[snap.Key]
	if !ok || !c.created.Equal(snap.Created) || c.from != snap.Consolidated || c.to > len(snap.Messages) {
		c = tally{created: snap.Created, from: snap.Consolidated, to: snap.Consolidated}
	}
	for _, m := range snap.Messages[c.to:] {
		c.n += history.Estimate(m)
	}
	c.to = len(snap.Messages)
	if t.m == nil || (!ok && len(t.m) >= maxTallies) {
		t.m = make(map[string]tally)
	}
	t.m[snap.Key] = c
	return c.n
}

// consolidateNow folds everything unconsolidated into memory, waiting for a
// consolidation of the session that is already running (for /new).
func (a *Agent) consolidateNow(ctx context.Context, key string) (consolidation, error) {
	st, ok := a.mem.acquire(ctx, key, true)
	if !ok {
		return consolidatedNothing, ctx.Err()
	}
	defer a.mem.release(key, st)
	// Part after part, so each model call sees a transcript that fits.
	result := consolidatedNothing
	for {
		done, err := a.consolidate(ctx, key, st, true)
		if err != nil || done == consolidatedNothing {
			return result, err
		}
		result = max(result, done)
		snap, err := a.store.Get(key)
		if err != nil {
			return result, fmt.Errorf("consolidate %s: %w", key, err)
		}
		if len(snap.Unconsolidated()) == 0 {
			return result, nil
		}
	}
}

// consolidate runs one consolidation of key while holding st's lock: the
// older part of the unconsolidated messages (or all of them) goes to the
// model, and on success the session's offset moves past it. On failure
// nothing moves and the next try waits a growing backoff; after
// MemoryMaxFailures consecutive failures the part is dumped to HISTORY.md
// as a transcript and the offset moves anyway, so nothing is lost and the
// session cannot grow without bound.
func (a *Agent) consolidate(ctx context.Context, key string, st *memoryState, all bool) (consolidation, error) {
	snap, err := a.store.Get(key)
	if err != nil {
		return consolidatedNothing, fmt.Errorf("consolidate %s: %w", key, err)
	}
	end := len(snap.Messages)
	if !all {
		end = cutPoint(snap.Messages, snap.Consolidated)
	}
	end = partEnd(snap.Messages, snap.Consolidated, end, a.partBudget(snap))
	if end <= snap.Consolidated {
		return consolidatedNothing, nil
	}
	part := snap.Messages[snap.Consolidated:end]
	log := a.log.With(zap.String("session", key), zap.Int("from", snap.Consolidated), zap.Int("to", end))

	err = a.withSlot(ctx, "", func() error { return a.memory.Consolidate(ctx, a.routeOf(snap), key, part) })
	done := consolidatedModel
	if err != nil {
		if ctx.Err() != nil {
			return consolidatedNothing, err // stopped, not failed: nothing counts
		}
		failures := a.recordFailure(st, err)
		if failures < a.cfg.MemoryMaxFailures {
			return consolidatedNothing, err
		}
		log.Warn("memory consolidation failed repeatedly; saving the messages as a transcript", zap.Int("failures", failures), zap.Error(err))
		if derr := a.memory.Dump(key, part, err); derr != nil {
			return consolidatedNothing, errors.Join(err, derr)
		}
		done = consolidatedDump
	}
	if err := a.store.SetMeta(key, session.MetaUpdate{Consolidated: &end}); err != nil {
		// Memory has the part but the offset did not move: the next run
		// folds it in again, which the merge prompt tolerates.
		a.recordFailure(st, err)
		return consolidatedNothing, fmt.Errorf("consolidate %s: record offset: %w", key, err)
	}
	a.mem.mu.Lock()
	st.failures, st.retryAt, st.lastErr = 0, time.Time{}, nil
	a.mem.mu.Unlock()
	log.Info("session consolidated", zap.Bool("raw_dump", done == consolidatedDump))
	return done, nil
}

// recordFailure counts a failed consolidation and sets when to try again:
// MemoryRetry, doubled per further failure, capped at maxMemoryBackoff.
func (a *Agent) recordFailure(st *memoryState, err error) int {
	a.mem.mu.Lock()
	defer a.mem.mu.Unlock()
	st.failures++
	st.lastErr = err
	backoff := a.cfg.MemoryRetry
	for i := 1; i < st.failures && backoff < maxMemoryBackoff; i++ {
		backoff *= 2
	}
	st.retryAt = a.now().Add(min(backoff, maxMemoryBackoff))
	return st.failures
}

// cutPoint picks where the older part of msgs[from:] ends: at a user message
// (a turn boundary), keeping at least the newest half when a boundary
// allows, and never taking the newest turn. It returns from when there is no
// such boundary (the unconsolidated part is one turn).
func cutPoint(msgs []llm.Message, from int) int {
	lastUser := -1
	for i := len(msgs) - 1; i > from; i-- {
		if msgs[i].Role == llm.RoleUser {
			lastUser = i
			break
		}
	}
	if lastUser < 0 {
		return from
	}
	mid := from + (len(msgs)-from)/2
	for i := min(mid, lastUser); i > from; i-- {
		if msgs[i].Role == llm.RoleUser {
			return i
		}
	}
	for i := mid + 1; i <= lastUser; i++ {
		if msgs[i].Role == llm.RoleUser {
			return i
		}
	}
	return lastUser
}

// partBudget is how many tokens of messages one consolidation call may
// carry: a third of the route's context window, leaving room for the prompt,
// the current MEMORY.md and the model's answer.
func (a *Agent) partBudget(snap session.Snapshot) int {
	return a.model.ContextWindow(a.routeOf(snap)) / 3
}

// partEnd shortens msgs[from:end] to the oldest whole turns whose estimate
// fits budget, so one consolidation call never has to drop messages from
// its transcript. A first turn larger than the budget is taken alone (the
// memory package shrinks that one transcript to fit).
func partEnd(msgs []llm.Message, from, end, budget int) int {
	used, cut := 0, from // msgs[from:cut] fits the budget and cut is a turn boundary
	for i := from; i < end; i++ {
		if i > from && msgs[i].Role == llm.RoleUser {
			if used > budget {
				break
			}
			cut = i
		}
		used += history.Estimate(msgs[i])
	}
	switch {
	case used <= budget:
		return end
	case cut > from:
		return cut
	}
	return nextUser(msgs, from, end)
}

// nextUser is the first turn boundary after from, or end.
func nextUser(msgs []llm.Message, from, end int) int {
	for i := from + 1; i < end; i++ {
		if msgs[i].Role == llm.RoleUser {
			return i
		}
	}
	return end
}

// withSlot runs fn holding one of the MaxConcurrentTurns slots, so that
// background model calls (consolidation, subagents) count against the same
// cap as turns.
func (a *Agent) withSlot(ctx context.Context, group string, fn func() error) error {
	release, err := a.turns.acquire(ctx, group)
	if err != nil {
		return err
	}
	defer release()
	return fn()
}
