package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/channels"
)

// journal keeps every update received but not yet acknowledged by the agent
// (Ack: the turn's answer was delivered, or the message was deliberately
// dropped), and the next offset to poll. It is written to disk before
// Telegram is told an update was received, so after a crash the updates
// still pending are replayed (nothing lost) and the acknowledged ones are
// not; the agent recognises a replayed message it had already recorded, so
// it finishes that turn or resends its answer rather than answering twice.
// The only windows for a repeat are a crash between Telegram accepting an
// answer and this file recording the ack, and a power loss soon after an
// ack: ack writes are not fsync'd (a process crash keeps them), receive
// writes are, because they guard against loss.
type journal struct {
	path string
	wmu  sync.Mutex // serialises file writes; taken before mu

	mu      sync.Mutex
	next    int64                     // offset for the next getUpdates
	pending map[int64]json.RawMessage // received, not acknowledged
	recent  map[int64]struct{}        // acknowledged ids > next-1 seen via webhook, bounded
	dirty   bool
	wake    chan struct{}
	// direct is set once the writer has stopped (the channel stopped taking
	// updates): acks of turns finishing during the daemon's shutdown drain
	// are then written at once, durably, or the restart would answer them
	// again.
	direct bool
	log    *zap.Logger
}

type journalFile struct {
	NextOffset int64             `json:"next_offset"`
	Pending    []json.RawMessage `json:"pending"`
}

func newJournal(path string, log *zap.Logger) *journal {
	return &journal{path: path, pending: map[int64]json.RawMessage{}, recent: map[int64]struct{}{}, wake: make(chan struct{}, 1), log: log}
}

func (j *journal) load() error {
	if j.path == "" {
		return nil
	}
	var f journalFile
	found, err := channels.ReadStateFile(j.path, &f)
	if errors.Is(err, channels.ErrCorruptState) {
		// A corrupt journal must not stop the bot; start over, loudly.
		return fmt.Errorf("update journal is corrupt (move it away to start over): %w", err)
	}
	if err != nil || !found {
		return err
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
// (acks in a burst share one write).
func (j *journal) ack(id int64) {
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
	direct := j.direct
	j.mu.Unlock()
	if direct {
		if err := j.save(true); err != nil {
			j.log.Error("update journal not written", zap.Error(err))
		}
		return
	}
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// writer persists acks until ctx ends; from then on ack writes itself.
func (j *journal) writer(ctx context.Context) {
	defer func() {
		j.mu.Lock()
		j.direct = true
		j.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-j.wake:
		}
		if err := j.save(false); err != nil {
			j.log.Error("update journal not written", zap.Error(err))
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

// snapshotLocked encodes the journal as journalFile does. It writes the
// JSON itself: every pending update is already valid JSON (decoded from a
// getUpdates answer, checked with json.Valid on a webhook, or read back from
// this file), and json.Marshal would re-validate and copy each one on every
// write, which was a twentieth of the gateway's CPU under load.
func (j *journal) snapshotLocked() ([]byte, error) {
	ids := make([]int64, 0, len(j.pending))
	size := len(`{"next_offset":,"pending":[]}`) + 20
	for id, raw := range j.pending {
		ids = append(ids, id)
		size += len(raw) + 1
	}
	slices.Sort(ids)
	buf := make([]byte, 0, size)
	buf = append(buf, `{"next_offset":`...)
	buf = strconv.AppendInt(buf, j.next, 10)
	buf = append(buf, `,"pending":[`...)
	for i, id := range ids {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, j.pending[id]...)
	}
	return append(buf, "]}"...), nil
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
