package schedule

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/bus"
)

// Processes sharing one workspace (the agent workers of a split gateway)
// each have their own Cron on the same jobs file.

func TestCronSeesChangesMadeByAnotherProcess(t *testing.T) {
	tests := []struct {
		name string
		// steps run on a and b, two schedulers of the same file; they
		// return the ids that must be left, in the file and as b sees them.
		steps func(t *testing.T, a, b *Cron) []string
	}{
		{"a job added there is listed here", func(t *testing.T, a, b *Cron) []string {
			mustJobs(t, b) // b has read the file before the change
			return []string{mustAdd(t, a, chat42, When{Every: "1h"}, "water the plants").ID}
		}},
		{"a job removed there is gone here", func(t *testing.T, a, b *Cron) []string {
			j := mustAdd(t, a, chat42, When{Every: "1h"}, "water the plants")
			mustJobs(t, b)
			if _, err := a.Remove(chat42.Key(), j.ID); err != nil {
				t.Fatal(err)
			}
			return nil
		}},
		{"adds in both keep both", func(t *testing.T, a, b *Cron) []string {
			mustJobs(t, a)
			mustJobs(t, b)
			x := mustAdd(t, a, chat42, When{Every: "1h"}, "x")
			y := mustAdd(t, b, chat42, When{Every: "2h"}, "y")
			return []string{x.ID, y.ID}
		}},
		{"a removal here does not bring back what was removed there", func(t *testing.T, a, b *Cron) []string {
			x := mustAdd(t, a, chat42, When{Every: "1h"}, "x")
			y := mustAdd(t, a, chat42, When{Every: "2h"}, "y")
			mustJobs(t, b)
			if _, err := a.Remove(chat42.Key(), x.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Remove(chat42.Key(), y.ID); err != nil {
				t.Fatal(err)
			}
			return nil
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newCronFixture(t)
			a, b := f.cron(), f.cron()
			want := tc.steps(t, a, b)
			slices.Sort(want)
			var inFile []string
			for _, j := range f.fileJobs() {
				inFile = append(inFile, j["id"].(string))
			}
			slices.Sort(inFile)
			var seen []string
			for _, j := range mustJobs(t, b) {
				seen = append(seen, j.ID)
			}
			slices.Sort(seen)
			if !slices.Equal(inFile, want) || !slices.Equal(seen, want) {
				t.Errorf("file holds %v, b sees %v; want %v", inFile, seen, want)
			}
		})
	}
}

func TestConcurrentAddsInSeveralProcessesLoseNoJob(t *testing.T) {
	f := newCronFixture(t)
	const procs, each = 4, 5
	var wg sync.WaitGroup
	for p := range procs {
		c := f.cron()
		wg.Go(func() {
			for i := range each {
				chat := Chat{Channel: "telegram", ChatID: fmt.Sprint(p*100 + i)}
				if _, err := c.Add(chat, When{Every: "1h"}, "job"); err != nil {
					t.Errorf("Add: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if n := len(f.fileJobs()); n != procs*each {
		t.Errorf("the file holds %d jobs, want %d", n, procs*each)
	}
}

// The running scheduler (the elected leader) runs a job another process's
// cron tool added, once it looks at the file again.
func TestWatchingCronRunsAJobAddedByAnotherProcess(t *testing.T) {
	f := newCronFixture(t)
	leader := NewCron(CronConfig{Path: f.path, Watch: time.Second}, CronDeps{Bus: f.inbox, Clock: f.clock}, zaptest.NewLogger(t))
	start(t, leader)
	waitArmed(t, f.clock, time.Second) // no jobs: only the watch is armed

	worker := f.cron()
	j := mustAdd(t, worker, chat42, When{At: "in 20m"}, "Remind the user to call mom")
	f.clock.Advance(20 * time.Minute)
	m := f.inbox.wait(t, 1)[0]
	if m.Metadata[MetaJobID] != j.ID {
		t.Fatalf("ran %q, want %s", m.Metadata[MetaJobID], j.ID)
	}
	m.Ack()
	if jobs := mustJobs(t, worker); len(jobs) != 0 {
		t.Errorf("the worker still sees %d jobs after the run was recorded", len(jobs))
	}
}

func mustJobs(t *testing.T, c *Cron) []Job {
	t.Helper()
	jobs, err := c.Jobs(chat42.Key())
	if err != nil {
		t.Fatalf("Jobs: %v", err)
	}
	return jobs
}

// flaky refuses the first publishes, like NATS away for longer than a
// publish waits.
type flaky struct {
	*inbox
	mu    sync.Mutex
	fails int
}

func (f *flaky) PublishInbound(ctx context.Context, m bus.InboundMessage) error {
	f.mu.Lock()
	fail := f.fails > 0
	if fail {
		f.fails--
	}
	f.mu.Unlock()
	if fail {
		return errors.New("nats: publish inbound: timeout")
	}
	return f.inbox.PublishInbound(ctx, m)
}

// A run the bus refused is tried again later: the scheduler keeps going
// while the daemon does.
func TestRefusedRunIsTriedAgain(t *testing.T) {
	f := newCronFixture(t)
	out := &flaky{inbox: f.inbox, fails: 1}
	c := NewCron(CronConfig{Path: f.path}, CronDeps{Bus: out, Clock: f.clock}, zaptest.NewLogger(t))
	j := mustAdd(t, c, chat42, When{Every: "1h"}, "water the plants")
	start(t, c)
	waitArmed(t, f.clock, time.Hour)
	f.clock.Advance(time.Hour)
	waitArmed(t, f.clock, publishRetry)
	if n := len(f.inbox.all()); n != 0 {
		t.Fatalf("published %d runs while the bus refused them", n)
	}
	f.clock.Advance(publishRetry)
	if m := f.inbox.wait(t, 1)[0]; m.Metadata[MetaJobID] != j.ID {
		t.Errorf("ran %q, want %s", m.Metadata[MetaJobID], j.ID)
	}
}
