package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/channels"
)

// journal keeps every update received but not yet acknowledged by the agent
// (Ack: its user message is persisted, or it was deliberately dropped), and
// the next offset to poll. It is written to disk before Telegram is told an
// update was received, so after a crash the updates still pending are
// replayed (nothing lost) and the acknowledged ones are not (nothing
// answered twice). The only windows for a repeat are a crash between the
// agent persisting a message and this file recording its ack, and a power
// loss soon after an ack: ack writes are not fsync'd (a process crash keeps
// them), receive writes are, because they guard against loss.
type journal struct {
	path string
	wmu  sync.Mutex // serialises file writes; taken before mu

	mu      sync.Mutex
	next    int64                     // offset for the next getUpdates
	pending map[int64]json.RawMessage // received, not acknowledged
	recent  map[int64]struct{}        // acknowledged ids > next-1 seen via webhook, bounded
	dirty   bool
	// closed is set when Run has ended and its writer with it. Acks still
	// come after that (turns running through the shutdown grace period
	// record their messages), and each is then written at once, or the
	// restart would answer those messages again.
	closed bool
	wake   chan struct{}
}

type journalFile struct {
	NextOffset int64             `json:"next_offset"`
	Pending    []json.RawMessage `json:"pending"`
}

func newJournal(path string) *journal {
	return &journal{path: path, pending: map[int64]json.RawMessage{}, recent: map[int64]struct{}{}, wake: make(chan struct{}, 1)}
}

func (j *journal) load() error {
	if j.path == "" {
		return nil
	}
	data, err := os.ReadFile(j.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("update journal: %w", err)
	}
	var f journalFile
	if err := json.Unmarshal(data, &f); err != nil {
		// A corrupt journal must not stop the bot; start over, loudly.
		return fmt.Errorf("update journal %s is corrupt (move it away to start over): %w", j.path, err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.next = f.NextOffset
	for _, raw := range f.Pending {
		if id := peekID(raw); id != 0 {
			j.pending[id] = raw
		}
	}
	return nil
}

// nextOffset is where polling resumes.
func (j *journal) nextOffset() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.next
}

// replay returns the pending updates in id order.
func (j *journal) replay() []json.RawMessage {
	j.mu.Lock()
	defer j.mu.Unlock()
	ids := make([]int64, 0, len(j.pending))
	for id := range j.pending {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]json.RawMessage, len(ids))
	for i, id := range ids {
		out[i] = j.pending[id]
	}
	return out
}

// received journals a batch and returns the updates not seen before. It
// writes (and fsyncs) the file before returning. ordered is true for
// getUpdates, whose offset also tells redeliveries apart; webhook calls may
// arrive out of order, so only the pending and recent sets are used for them.
func (j *journal) received(batch []json.RawMessage, ordered bool) ([]json.RawMessage, error) {
	j.wmu.Lock()
	defer j.wmu.Unlock()
	j.mu.Lock()
	var fresh []json.RawMessage
	next := j.next
	for _, raw := range batch {
		id := peekID(raw)
		_, pending := j.pending[id]
		_, recent := j.recent[id]
		if (ordered && id < j.next) || pending || recent {
			continue // a redelivery
		}
		j.pending[id] = raw
		fresh = append(fresh, raw)
		if ordered {
			next = max(next, id+1)
		}
	}
	if len(fresh) == 0 {
		j.mu.Unlock()
		return nil, nil
	}
	prev := j.next
	j.next = next
	data, err := j.snapshotLocked()
	j.mu.Unlock()
	if err == nil {
		err = j.write(data, true)
	}
	if err != nil {
		j.mu.Lock()
		for _, raw := range fresh {
			delete(j.pending, peekID(raw))
		}
		j.next = prev
		j.mu.Unlock()
		return nil, err
	}
	return fresh, nil
}

// ack forgets an update; the file is rewritten by the writer goroutine
// (acks in a burst share one write), or here once the journal is closed.
// Only that direct write can fail.
func (j *journal) ack(id int64) error {
	j.mu.Lock()
	if _, ok := j.pending[id]; ok {
		delete(j.pending, id)
		j.recent[id] = struct{}{}
		if len(j.recent) > 4096 {
			for old := range j.recent {
				if old < id-4096 {
					delete(j.recent, old)
				}
			}
		}
		j.dirty = true
	}
	closed := j.closed
	j.mu.Unlock()
	if closed {
		return j.save(true)
	}
	select {
	case j.wake <- struct{}{}:
	default:
	}
	return nil
}

// close writes the journal durably after the writer has stopped; later
// acks write it themselves.
func (j *journal) close() error {
	j.mu.Lock()
	j.closed = true
	j.mu.Unlock()
	return j.save(true)
}

// writer persists acks until ctx ends.
func (j *journal) writer(ctx context.Context, log *zap.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-j.wake:
		}
		if err := j.save(false); err != nil {
			log.Error("update journal not written", zap.Error(err))
		}
	}
}

// save writes the journal if acks changed it; sync makes it durable (at
// shutdown), otherwise it is not fsync'd.
func (j *journal) save(sync bool) error {
	j.wmu.Lock()
	defer j.wmu.Unlock()
	j.mu.Lock()
	if !j.dirty {
		j.mu.Unlock()
		return nil
	}
	j.dirty = false
	data, err := j.snapshotLocked()
	j.mu.Unlock()
	if err == nil {
		err = j.write(data, sync)
	}
	if err != nil {
		j.mu.Lock()
		j.dirty = true
		j.mu.Unlock()
	}
	return err
}

func (j *journal) snapshotLocked() ([]byte, error) {
	f := journalFile{NextOffset: j.next, Pending: make([]json.RawMessage, 0, len(j.pending))}
	ids := make([]int64, 0, len(j.pending))
	for id := range j.pending {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		f.Pending = append(f.Pending, j.pending[id])
	}
	return json.Marshal(f)
}

// write replaces the file atomically; sync also makes it durable.
func (j *journal) write(data []byte, sync bool) error {
	if j.path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(j.path), 0o700); err != nil {
		return fmt.Errorf("update journal: %w", err)
	}
	if sync {
		if err := channels.WriteFileAtomic(j.path, data, 0o600); err != nil {
			return fmt.Errorf("update journal: %w", err)
		}
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(j.path), ".telegram-updates.tmp-*")
	if err != nil {
		return fmt.Errorf("update journal: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("update journal: %w", err)
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("update journal: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("update journal: %w", err)
	}
	if err := os.Rename(tmp.Name(), j.path); err != nil {
		return fmt.Errorf("update journal: %w", err)
	}
	return nil
}
