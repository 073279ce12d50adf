package agent

import (
	"context"
	"slices"
	"sync"
)

// turnSlots shares the concurrent-turn budget between chats
// (docs/architecture.md#one-message-end-to-end). At most total turns run at
// once; turns of group chats, all together, at most groupMax; turns of one
// group (its forum topics or threads) at most perGroup. Direct messages are
// bound only by total, so when groupMax is below total a busy group can never
// keep the owner's DM waiting, and one group cannot take the whole group share
// from the others.
//
// A session runs one turn at a time already (its serve goroutine), so a
// plain group without topics never holds more than one slot.
type turnSlots struct {
	total, groupMax, perGroup int

	mu      sync.Mutex
	used    int
	inGroup int            // slots held by group chats
	byGroup map[string]int // slots held per group
	// queue holds the waiters in arrival order. A released slot is handed to
	// the first waiter it fits, so waiting is first come, first served and
	// a release wakes one goroutine, not all of them.
	queue []*slotWaiter
}

// slotWaiter is one acquire waiting for a slot.
type slotWaiter struct {
	group   string
	ready   chan struct{} // closed when the slot is granted
	granted bool
}

// newTurnSlots applies the defaults: groupMax 0 means total-1 (at least 1),
// perGroup 0 means half the group share (at least 1).
func newTurnSlots(total, groupMax, perGroup int) *turnSlots {
	total = max(total, 1)
	if groupMax <= 0 {
		groupMax = max(total-1, 1)
	}
	groupMax = min(groupMax, total)
	if perGroup <= 0 {
		perGroup = max((groupMax+1)/2, 1)
	}
	perGroup = min(perGroup, groupMax)
	return &turnSlots{total: total, groupMax: groupMax, perGroup: perGroup, byGroup: map[string]int{}}
}

// acquire waits for a slot for a turn of group ("" for a direct message)
// and returns the function that gives it back. It fails only when ctx ends.
// Waiters are served in arrival order among those a free slot fits (a DM
// may pass a group waiting for the group share).
func (s *turnSlots) acquire(ctx context.Context, group string) (release func(), err error) {
	s.mu.Lock()
	// Queued waiters never fit (every release serves them first), so taking
	// a slot that fits now passes nobody who could have had it.
	if s.fits(group) {
		s.take(group)
		s.mu.Unlock()
		return s.releaser(group), nil
	}
	w := &slotWaiter{group: group, ready: make(chan struct{})}
	s.queue = append(s.queue, w)
	s.mu.Unlock()
	select {
	case <-w.ready:
		return s.releaser(group), nil
	case <-ctx.Done():
		s.mu.Lock()
		if w.granted { // granted while giving up: hand it on
			s.giveBackLocked(group)
		} else {
			s.queue = slices.DeleteFunc(s.queue, func(q *slotWaiter) bool { return q == w })
		}
		s.mu.Unlock()
		return nil, ctx.Err()
	}
}

func (s *turnSlots) releaser(group string) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.giveBackLocked(group)
			s.mu.Unlock()
		})
	}
}

func (s *turnSlots) fits(group string) bool {
	if s.used >= s.total {
		return false
	}
	return group == "" || (s.inGroup < s.groupMax && s.byGroup[group] < s.perGroup)
}

func (s *turnSlots) take(group string) {
	s.used++
	if group != "" {
		s.inGroup++
		s.byGroup[group]++
	}
}

// giveBackLocked returns group's slot and serves the queue.
func (s *turnSlots) giveBackLocked(group string) {
	s.used--
	if group != "" {
		s.inGroup--
		if s.byGroup[group]--; s.byGroup[group] <= 0 {
			delete(s.byGroup, group)
		}
	}
	for i := 0; i < len(s.queue); {
		w := s.queue[i]
		if !s.fits(w.group) {
			i++
			continue
		}
		s.take(w.group)
		w.granted = true
		close(w.ready)
		s.queue = slices.Delete(s.queue, i, i+1)
	}
}

// inUse reports the slots held in total and by group chats, for tests.
func (s *turnSlots) inUse() (total, groups int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used, s.inGroup
}
