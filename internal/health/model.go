package health

import (
	"fmt"
	"sync"
	"time"

	"github.com/nanobot-go/nanobot/internal/clock"
)

// ModelHealth remembers how the last model call that says something about
// the provider went, so /readyz can report "provider reachable recently"
// without calling it. It is safe for concurrent use; the zero value is
// ready ("no call yet" is not a failure) and reads the real clock.
type ModelHealth struct {
	// Clock is the time of failures and recoveries [clock.System].
	Clock clock.Clock

	mu      sync.Mutex
	failed  error
	at      time.Time
	success time.Time
}

// Record notes a call's outcome: nil for a call the provider served (or
// refused on its merits), the error for one showing the provider cannot
// serve requests (unreachable, 5xx, key refused, quota used up). Calls that
// say nothing about the provider (cancelled by the user) are not recorded.
func (m *ModelHealth) Record(err error) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failed, m.at = err, now
	if err == nil {
		m.success = now
	}
}

// Check returns nil unless the last recorded call failed; then an error
// saying when, why, and when a call last succeeded.
func (m *ModelHealth) Check() error {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failed == nil {
		return nil
	}
	last := "never since start"
	if !m.success.IsZero() {
		last = ago(now, m.success)
	}
	return fmt.Errorf("the last model call (%s) failed: %v; last success: %s", ago(now, m.at), m.failed, last)
}

// LastFailure returns the error of the last recorded call and how long ago
// it was recorded, or a nil error when the last call succeeded or none was
// recorded yet.
func (m *ModelHealth) LastFailure() (error, time.Duration) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failed == nil {
		return nil, 0
	}
	return m.failed, now.Sub(m.at)
}

func (m *ModelHealth) now() time.Time {
	if m.Clock != nil {
		return m.Clock.Now()
	}
	return time.Now()
}

func ago(now, t time.Time) string {
	return now.Sub(t).Round(time.Second).String() + " ago"
}
