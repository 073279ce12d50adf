package usage

import (
	"fmt"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/clock"
)

// OpenReadOnly reads the ledger in dir as it stands, for a process beside
// the one that keeps it (nanobot usage while the gateway runs). It writes
// nothing: it neither sums finished days into days.jsonl nor deletes old
// detail, which stay the keeper's, so two processes never sum a day twice.
// It takes no lock: the keeper only appends, a record reaches the file in
// one write before its call returns (synced later, but visible at once),
// and a line the keeper is halfway through writing is left out like a torn
// one. Record on it fails with ErrClosed; Query and Spent answer from what
// was read. A missing dir is an empty ledger.
func OpenReadOnly(dir string, opts Options) (*Ledger, error) {
	if opts.Location == nil {
		opts.Location = time.UTC
	}
	if opts.Clock == nil {
		opts.Clock = clock.System{}
	}
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		return nil, fmt.Errorf("usage ledger %s: not a directory", dir)
	}
	l := &Ledger{dir: dir, opts: opts, days: map[string]dayAgg{}, sealed: map[string]bool{}, lazy: map[string][]span{}, seqs: map[uint64]bool{},
		closed: true}
	if _, err := l.read(); err != nil {
		return nil, err
	}
	return l, nil
}
