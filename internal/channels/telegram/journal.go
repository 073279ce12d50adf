package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/atomicfile"
	"github.com/nanobot-go/nanobot/internal/channels"
)

// journal keeps every update received but not yet acknowledged by the agent
// (Ack: the turn's answer was delivered, or the message was deliberately
// dropped), and the next offset to poll. A batch is written, handed to the
// agent, and fsync'd before Telegram is told it was received (received
// returns the fsync for the caller to run once the turns have started, so
// the disk works while they start): after a crash the updates still pending
// are replayed (nothing lost) and the acknowledged ones are not; the agent
// recognises a replayed message it had already recorded, so it finishes that
// turn or resends its answer rather than answering twice. A batch handed over
// but not yet fsync'd is lost only with the machine (a power cut; a process
// crash keeps what was written), and it was not confirmed either, so
// Telegram delivers it again and the agent recognises it like a replay.
// The only windows for a repeat are a crash between Telegram accepting an
// answer and this file recording the ack, and a power loss soon after an
// ack: ack writes are not fsync'd (a process crash keeps them), receive
// writes are before they are confirmed, because they guard against loss.
//
// A failed write or fsync leaves the file unknown: a partial line, or pages
// the kernel dropped (after a failed fsync Linux may mark unwritten pages
// clean, so a second fsync would succeed without writing them). The journal
// is then dirty: the next write (a batch, acks) or sync rewrites the whole
// state (compact) instead, so nothing is confirmed before it has.
//
// The file is a log of JSON lines, appended to (one write per batch, one
// per burst of acks) and compacted now and then:
//
//	{"next_offset":N,"pending":[update,...]}   a snapshot: the whole state (always the first line)
//	{"next_offset":N,"add":[update,...]}       a batch received
//	{"ack":[id,...]}                           updates acknowledged
//
// Compaction rewrites the file as one snapshot line through a temp file and
// a rename (atomicfile.Write), so a crash leaves either the old log
// or the new snapshot. A crash during an append can leave a torn last line:
// reading drops it with a warning. It cannot have been confirmed to Telegram
// (the fsync had not returned) or it was an ack, which at worst replays a
// message the agent then recognises. The file was one snapshot document
// before; such a file reads as a log of one line.
type journal struct {
	path string
	wmu  sync.Mutex // serialises file writes; taken before mu
	// Under wmu: the file appended to (nil until the first write or after
	// a failed one, which compacts instead), and the bytes appended since
	// the last compaction.
	f        *os.File
	appended int64
	closed   bool // set by finish: no file is kept open
	// dirty is set by a failed write or fsync: the file is rewritten
	// whole before anything more is confirmed.
	dirty bool
	// fsync is (*os.File).Sync; tests make it fail.
	fsync func(*os.File) error
	// compactAt is the least the log grows by before it is compacted
	// (compactMin; tests lower it).
	compactAt int64

	mu      sync.Mutex
	next    int64                     // offset for the next getUpdates
	pending map[int64]json.RawMessage // received, not acknowledged
	live    int64                     // bytes of the pending updates: the size of a snapshot
	recent  map[int64]struct{}        // acknowledged ids > next-1 seen via webhook, bounded
	acked   []int64                   // acknowledged, not yet written
	wake    chan struct{}
	// direct is set once the writer has stopped (the channel stopped taking
	// updates): acks of turns finishing during the daemon's shutdown drain
	// are then written at once, durably, or the restart would answer them
	// again.
	direct bool
	log    *zap.Logger
}

// recentKeep is how far back acknowledged ids are remembered to tell a
// webhook's redelivery from a new update: at least the last recentKeep, at
// most twice as many.
const recentKeep = 4096

// compactMin is the least a log grows by before it is compacted; past it,
// it is compacted once the appended records outweigh twice a snapshot. At
// ~400 bytes a turn that is one rewrite every few hundred turns.
const compactMin = 256 << 10

type journalFile struct {
	NextOffset int64             `json:"next_offset"`
	Pending    []json.RawMessage `json:"pending"`
}

// journalRecord is one line of the file: a snapshot (Pending set), a batch
// (Add) or acknowledgements (Ack).
type journalRecord struct {
	NextOffset *int64            `json:"next_offset"`
	Pending    []json.RawMessage `json:"pending"`
	Add        []json.RawMessage `json:"add"`
	Ack        []int64           `json:"ack"`
}

func newJournal(path string, log *zap.Logger) *journal {
	return &journal{path: path, pending: map[int64]json.RawMessage{}, recent: map[int64]struct{}{}, wake: make(chan struct{}, 1),
		compactAt: compactMin, fsync: (*os.File).Sync, log: log}
}

// ReadJournal reads the update journal at path (<data dir>/telegram-updates.json)
// as a restart would: the next offset to poll and the updates still pending,
// in id order. A missing file is an empty journal. It is for tools and tests
// that look at a daemon's state; the file may be read while the daemon runs.
func ReadJournal(path string) (next int64, pending []json.RawMessage, err error) {
	st, _, err := readJournal(path)
	if err != nil {
		return 0, nil, err
	}
	for _, id := range slices.Sorted(maps.Keys(st.pending)) {
		pending = append(pending, st.pending[id])
	}
	return st.next, pending, nil
}

type journalState struct {
	next    int64
	pending map[int64]json.RawMessage
}

// readJournal replays the log at path. torn is set when the last line was
// cut short and dropped.
func readJournal(path string) (st journalState, torn bool, err error) {
	st.pending = map[int64]json.RawMessage{}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return st, false, nil
	}
	if err != nil {
		return st, false, fmt.Errorf("read %s: %w", path, err)
	}
	all := data
	for n := 1; len(data) > 0; n++ {
		line, rest, _ := bytes.Cut(data, []byte{'\n'})
		data = rest
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r journalRecord
		if err := json.Unmarshal(line, &r); err != nil {
			switch {
			case n == 1:
				// The first line is a snapshot, written whole by a rename, so
				// it is never torn; it may be the single document of the
				// format before the log, with line breaks inside.
				return readSnapshot(path, all)
			case len(bytes.TrimSpace(rest)) == 0:
				// The last line, cut short by a crash during its append.
				return st, true, nil
			}
			return st, false, fmt.Errorf("%w %s: line %d: %w", channels.ErrCorruptState, path, n, err)
		}
		if r.Pending != nil {
			clear(st.pending)
		}
		if r.NextOffset != nil {
			st.next = max(st.next, *r.NextOffset)
		}
		for _, raws := range [][]json.RawMessage{r.Pending, r.Add} {
			for _, raw := range raws {
				if id := peekID(raw); id != 0 {
					st.pending[id] = oneLine(raw)
				}
			}
		}
		for _, id := range r.Ack {
			delete(st.pending, id)
		}
	}
	return st, false, nil
}

// readSnapshot reads a file holding one journalFile document.
func readSnapshot(path string, data []byte) (st journalState, torn bool, err error) {
	var f journalFile
	if err := json.Unmarshal(data, &f); err != nil {
		return st, false, fmt.Errorf("%w %s: %w", channels.ErrCorruptState, path, err)
	}
	st.next = f.NextOffset
	st.pending = map[int64]json.RawMessage{}
	for _, raw := range f.Pending {
		if id := peekID(raw); id != 0 {
			st.pending[id] = oneLine(raw)
		}
	}
	return st, false, nil
}

// load reads the journal and compacts it, so appends start on a whole file
// (a torn last line is gone) in the current format.
func (j *journal) load() error {
	if j.path == "" {
		return nil
	}
	st, torn, err := readJournal(j.path)
	if errors.Is(err, channels.ErrCorruptState) {
		// A corrupt journal must not stop the bot silently; start over, loudly.
		return fmt.Errorf("update journal is corrupt (move it away to start over): %w", err)
	}
	if err != nil {
		return err
	}
	if torn {
		j.log.Warn("update journal: dropped a last line cut short by a crash (a batch never confirmed to Telegram, or acknowledgements)",
			zap.String("path", j.path))
	}
	j.wmu.Lock()
	defer j.wmu.Unlock()
	j.closed = false
	j.mu.Lock()
	j.next = st.next
	j.pending = st.pending
	j.live = 0
	for _, raw := range st.pending {
		j.live += int64(len(raw)) + 1
	}
	j.mu.Unlock()
	// A crash during a compaction leaves its temp file behind.
	stale, _ := filepath.Glob(filepath.Join(filepath.Dir(j.path), "."+filepath.Base(j.path)+".tmp-*"))
	for _, p := range stale {
		_ = os.Remove(p)
	}
	if _, err := os.Stat(j.path); errors.Is(err, fs.ErrNotExist) {
		return nil // nothing to compact; the first write creates the file
	}
	return j.compact()
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

// received journals a batch: it appends the updates not seen before to the
// file, without an fsync, and returns them with sync, which makes them
// durable. The caller hands the fresh updates over first, so their turns
// start while the disk works, then calls sync, and confirms the batch to
// Telegram only if sync returned nil (see journal for why handing them over
// first is safe). A batch with nothing fresh still gets a sync to call: one
// of its updates may be pending in a write not yet fsync'd. ordered is true
// for getUpdates, whose offset also tells redeliveries apart; webhook calls
// may arrive out of order, so only the pending and recent sets are used for
// them.
func (j *journal) received(batch []json.RawMessage, ordered bool) (fresh []json.RawMessage, sync func() error, err error) {
	j.wmu.Lock()
	defer j.wmu.Unlock()
	j.mu.Lock()
	var ids []int64
	next := j.next
	for _, raw := range batch {
		id := peekID(raw)
		_, pending := j.pending[id]
		_, recent := j.recent[id]
		if (ordered && id < j.next) || pending || recent {
			continue // a redelivery
		}
		raw = oneLine(raw)
		j.pending[id] = raw
		j.live += int64(len(raw)) + 1
		fresh = append(fresh, raw)
		ids = append(ids, id)
		if ordered {
			next = max(next, id+1)
		}
	}
	if len(fresh) == 0 {
		j.mu.Unlock()
		return nil, j.sync, nil
	}
	prev := j.next
	j.next = next
	j.mu.Unlock()

	if err := j.appendLocked(batchRecord(next, fresh), false); err != nil {
		// Not handed over, not confirmed: Telegram delivers it again.
		j.mu.Lock()
		for i, id := range ids {
			delete(j.pending, id)
			j.live -= int64(len(fresh[i])) + 1
		}
		j.next = prev
		j.mu.Unlock()
		return nil, nil, err
	}
	return fresh, j.sync, nil
}

// sync makes everything written so far durable: it fsyncs the file, or
// rewrites it whole when it is dirty. A batch already on disk through a
// compaction since costs one needless fsync of the new file.
func (j *journal) sync() error {
	j.wmu.Lock()
	defer j.wmu.Unlock()
	switch {
	case j.path == "":
		return nil
	case j.dirty:
		return j.compact()
	case j.f == nil:
		return nil // nothing written yet, or stopped: every write since was a compaction, fsync'd
	}
	if err := j.fsync(j.f); err != nil {
		return j.failedLocked(fmt.Errorf("fsync: %w", err))
	}
	return nil
}

// oneLine returns raw without line breaks, so it fits on one line of the
// log: a getUpdates answer is compact, a webhook body may be indented.
func oneLine(raw json.RawMessage) json.RawMessage {
	if bytes.IndexByte(raw, '\n') < 0 {
		return raw
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw // checked valid before; cannot happen
	}
	return b.Bytes()
}

// ack forgets an update; the record is appended by the writer goroutine
// (acks in a burst share one write).
func (j *journal) ack(id int64) {
	j.mu.Lock()
	if raw, ok := j.pending[id]; ok {
		delete(j.pending, id)
		j.live -= int64(len(raw)) + 1
		j.acked = append(j.acked, id)
		j.recent[id] = struct{}{}
		if len(j.recent) > 2*recentKeep {
			// Pruned only once it has doubled: pruning at the bound itself
			// walked all 4,096 entries on every ack, which showed in a
			// turn's CPU (docs/BENCHMARKS.md#figures-behind-code-choices).
			for old := range j.recent {
				if old < id-recentKeep {
					delete(j.recent, old)
				}
			}
		}
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

// writer persists acks, and compacts the file when it has grown, until ctx
// ends; from then on ack writes itself.
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

// save appends the acks not yet written; sync makes the file durable (at
// shutdown and after), otherwise it is not fsync'd. It compacts the file
// when the log has outgrown its snapshot.
func (j *journal) save(sync bool) error {
	j.wmu.Lock()
	defer j.wmu.Unlock()
	j.mu.Lock()
	acked := j.acked
	j.acked = nil
	live := j.live
	j.mu.Unlock()
	if len(acked) > 0 {
		if err := j.appendLocked(ackRecord(acked), sync); err != nil {
			j.mu.Lock()
			j.acked = append(acked, j.acked...)
			j.mu.Unlock()
			return err
		}
	}
	if j.dirty || (j.f != nil && j.appended > max(j.compactAt, 2*live)) {
		return j.compact()
	}
	return nil
}

// finish writes what is left and leaves the file as one snapshot, fsync'd,
// when the channel stops. Acks that come later (turns finishing during the
// shutdown drain) are each written durably.
func (j *journal) finish() error {
	if err := j.save(true); err != nil {
		return err
	}
	j.wmu.Lock()
	defer j.wmu.Unlock()
	if j.path == "" {
		return nil
	}
	j.closed = true
	if err := j.compact(); err != nil {
		return err
	}
	return nil
}

// appendLocked appends one record (a line) to the file, fsync'd if sync.
// Without an open file (the first write, or stopped) or when dirty it
// compacts instead, which writes the whole state, this record's change
// included, durably. The caller holds wmu.
func (j *journal) appendLocked(rec []byte, sync bool) error {
	if j.path == "" {
		return nil
	}
	if j.f == nil || j.dirty {
		return j.compact()
	}
	if _, err := j.f.Write(rec); err != nil {
		return j.failedLocked(err)
	}
	j.appended += int64(len(rec))
	if sync {
		if err := j.fsync(j.f); err != nil {
			return j.failedLocked(fmt.Errorf("fsync: %w", err))
		}
	}
	return nil
}

// failedLocked marks the journal dirty after a failed write or fsync: the
// file may end in a partial line, or miss pages the kernel dropped, so the
// next write rewrites it rather than append to it. The caller holds wmu.
func (j *journal) failedLocked(err error) error {
	_ = j.f.Close()
	j.f = nil
	j.dirty = true
	return fmt.Errorf("update journal: %w", err)
}

// compact rewrites the file as one snapshot of the current state, which
// leaves it known-good: dirty is cleared on success and set on failure.
// The caller holds wmu.
func (j *journal) compact() error {
	if err := j.rewrite(); err != nil {
		j.dirty = true
		return err
	}
	j.dirty = false
	return nil
}

// rewrite replaces the file with one snapshot of the current state, written
// and fsync'd through a temp file and a rename, and reopens it for appends
// (unless the journal is closed). The caller holds wmu.
func (j *journal) rewrite() error {
	j.mu.Lock()
	data := append(j.snapshotLocked(), '\n')
	j.mu.Unlock()
	if j.f != nil {
		_ = j.f.Close()
		j.f = nil
	}
	if err := os.MkdirAll(filepath.Dir(j.path), 0o700); err != nil {
		return fmt.Errorf("update journal: %w", err)
	}
	if err := atomicfile.Write(j.path, data, 0o600); err != nil {
		return fmt.Errorf("update journal: %w", err)
	}
	j.appended = 0
	if j.closed {
		return nil // stopped: a later write compacts again rather than keep a file open
	}
	f, err := os.OpenFile(j.path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("update journal: %w", err)
	}
	j.f = f
	return nil
}

// batchRecord is the line for a batch received. Every update is already
// valid JSON on one line (decoded from a getUpdates answer, checked with
// json.Valid on a webhook and passed through oneLine), so it is written as
// is rather than re-validated by json.Marshal.
func batchRecord(next int64, fresh []json.RawMessage) []byte {
	size := len(`{"next_offset":,"add":[]}`) + 21
	for _, raw := range fresh {
		size += len(raw) + 1
	}
	buf := make([]byte, 0, size)
	buf = append(buf, `{"next_offset":`...)
	buf = strconv.AppendInt(buf, next, 10)
	buf = append(buf, `,"add":[`...)
	for i, raw := range fresh {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, raw...)
	}
	return append(buf, "]}\n"...)
}

// ackRecord is the line for acknowledged updates.
func ackRecord(ids []int64) []byte {
	buf := make([]byte, 0, 10+len(ids)*11)
	buf = append(buf, `{"ack":[`...)
	for i, id := range ids {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = strconv.AppendInt(buf, id, 10)
	}
	return append(buf, "]}\n"...)
}

// snapshotLocked encodes the journal as journalFile does, without
// re-validating the updates (see batchRecord).
func (j *journal) snapshotLocked() []byte {
	ids := make([]int64, 0, len(j.pending))
	size := len(`{"next_offset":,"pending":[]}`) + 20
	for id, raw := range j.pending {
		ids = append(ids, id)
		size += len(raw) + 1
	}
	slices.Sort(ids)
	buf := make([]byte, 0, size+1)
	buf = append(buf, `{"next_offset":`...)
	buf = strconv.AppendInt(buf, j.next, 10)
	buf = append(buf, `,"pending":[`...)
	for i, id := range ids {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, j.pending[id]...)
	}
	return append(buf, "]}"...)
}
