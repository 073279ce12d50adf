package agent

import (
	"context"
	"sync"
)

// turnSlots shares the concurrent-turn budget between chats (S-F2). At most
// total turns run at once; turns of group chats, all together, at most
// groupMax; turns of one group (its forum topics or threads) at most
// perGroup. Direct messages are bound only by total, so when groupMax is
// below total a busy group can never keep the owner's DM waiting, and one
// group cannot take the whole group share from the others.
//
// A session runs one turn at a time already (its serve goroutine), so a
// plain group without topics never holds more than one slot.
type turnSlots struct {
	total, groupMax, perGroup int

	mu      sync.Mutex
	used    int
	inGroup int            // slots held by group chats
	byGroup map[string]int // slots held per group
	freed   chan struct{}  // closed and replaced whenever a slot is released
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
	return &turnSlots{total: total, groupMax: groupMax, perGroup: perGroup,
		byGroup: map[string]int{}, freed: make(chan struct{})}
}

// acquire waits for a slot for a turn of group ("" for a direct message)
// and returns the function that gives it back. It fails only when ctx ends.
func (s *turnSlots) acquire(ctx context.Context, group string) (release func(), err error) {
	for {
		s.mu.Lock()
		if s.fits(group) {
			s.used++
			if group != "" {
				s.inGroup++
				s.byGroup[group]++
			}
			s.mu.Unlock()
			var once sync.Once
			return func() { once.Do(func() { s.release(group) }) }, nil
		}
		freed := s.freed
		s.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (s *turnSlots) fits(group string) bool {
	if s.used >= s.total {
		return false
	}
	return group == "" || (s.inGroup < s.groupMax && s.byGroup[group] < s.perGroup)
}

func (s *turnSlots) release(group string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.used--
	if group != "" {
		s.inGroup--
		if s.byGroup[group]--; s.byGroup[group] <= 0 {
			delete(s.byGroup, group)
		}
	}
	close(s.freed)
	s.freed = make(chan struct{})
}

// inUse reports the slots held in total and by group chats, for tests.
func (s *turnSlots) inUse() (total, groups int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used, s.inGroup
}
