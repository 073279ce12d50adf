package matrix

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/nanobot-go/nanobot/internal/atomicfile"
	"github.com/nanobot-go/nanobot/internal/channels"
)

// Store keeps the sync position's document, replaced whole at each save:
// a file in the data dir (FileStore), or a KV bucket when the channels
// process is scaled out (internal/channels/cursorkv's Store has the same
// two methods).
type Store interface {
	// Load returns the document last saved, found false when there is none.
	Load(ctx context.Context) (data []byte, found bool, err error)
	// Save replaces the document, durably once it returns nil.
	Save(ctx context.Context, data []byte) error
}

// FileStore keeps the document in a file, rewritten atomically (0600).
type FileStore struct{ Path string }

var _ Store = FileStore{}

// Load reads the file; a missing file is no document.
func (f FileStore) Load(context.Context) ([]byte, bool, error) {
	var raw json.RawMessage
	found, err := channels.ReadStateFile(f.Path, &raw)
	return raw, found, err
}

// Save replaces the file atomically.
func (f FileStore) Save(_ context.Context, data []byte) error {
	return atomicfile.Write(f.Path, data, 0o600)
}

// syncState is where the sync stands: the next_batch token up to which
// every event was handled, the events handled since it of a batch that
// was cut short (by a stop), so that fetching that batch again after a
// restart skips them, and the messages handed to the agent and not yet
// answered, handed over again at the next start. Saved when a batch is
// done, when an answer is delivered and when Run ends, so a clean restart
// neither loses nor repeats a message; a crash repeats at most the batch
// in flight, and a turn it cut is finished after the restart.
type syncState struct {
	store Store

	// saveMu orders the saves: the sync loop's and the acknowledgements'
	// run on different goroutines, and a document taken earlier must not
	// land after a later one.
	saveMu sync.Mutex
	mu     sync.Mutex
	doc    stateDoc
}

type stateDoc struct {
	NextBatch string `json:"next_batch"`
	// Done are the event ids handled from the batch after NextBatch.
	Done []string `json:"done,omitempty"`
	// Last is, per room, the last event handled: a gap is filled back to
	// it and no further.
	Last map[string]string `json:"last,omitempty"`
	// Told are the encrypted rooms already told they are not read.
	Told []string `json:"encrypted_rooms_told,omitempty"`
	// Unanswered are the messages handed to the agent whose answer was
	// not delivered yet (their Ack has not come), oldest first: a crash
	// or a stop before it does hands them over again at the next start.
	Unanswered []heldEvent `json:"unanswered,omitempty"`
}

// heldEvent is a message handed over and not answered yet.
type heldEvent struct {
	Room  string `json:"room"`
	Event string `json:"event"`
}

// maxUnanswered bounds the messages kept for a handing-over again: far
// more than the turns a daemon runs at once; past it the oldest goes.
const maxUnanswered = 512

func newSyncState(store Store) *syncState { return &syncState{store: store} }

// load reads the saved position; without a store the bot starts fresh.
func (s *syncState) load(ctx context.Context) error {
	if s.store == nil {
		return nil
	}
	data, found, err := s.store.Load(ctx)
	if err != nil || !found {
		return err
	}
	var doc stateDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%w: %w", channels.ErrCorruptState, err)
	}
	s.mu.Lock()
	s.doc = doc
	s.mu.Unlock()
	return nil
}

func (s *syncState) since() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.doc.NextBatch
}

// handled reports whether an event of the pending batch was handled before.
func (s *syncState) handled(eventID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.doc.Done {
		if d == eventID {
			return true
		}
	}
	return false
}

func (s *syncState) markHandled(room, eventID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.doc.Done = append(s.doc.Done, eventID)
	if s.doc.Last == nil {
		s.doc.Last = map[string]string{}
	}
	s.doc.Last[room] = eventID
}

// last is the last event handled in room, "" when none is known.
func (s *syncState) last(room string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.doc.Last[room]
}

// forget drops what is kept of a room the bot left.
func (s *syncState) forget(room string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.doc.Last, room)
}

// advance records that every event up to next was handled.
func (s *syncState) advance(next string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.doc.NextBatch, s.doc.Done = next, nil
}

// hold records a message handed to the agent, until answered drops it.
// It reports the oldest one dropped to make room, if any.
func (s *syncState) hold(room, eventID string) (dropped heldEvent, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.doc.Unanswered {
		if h.Event == eventID {
			return heldEvent{}, false
		}
	}
	s.doc.Unanswered = append(s.doc.Unanswered, heldEvent{Room: room, Event: eventID})
	if len(s.doc.Unanswered) > maxUnanswered {
		dropped, ok = s.doc.Unanswered[0], true
		s.doc.Unanswered = slices.Delete(s.doc.Unanswered, 0, 1)
	}
	return dropped, ok
}

// answered drops a held message; it reports whether it was held.
func (s *syncState) answered(eventID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.doc.Unanswered)
	s.doc.Unanswered = slices.DeleteFunc(s.doc.Unanswered, func(h heldEvent) bool { return h.Event == eventID })
	return len(s.doc.Unanswered) != n
}

// unanswered is a copy of the held messages, oldest first.
func (s *syncState) unanswered() []heldEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.doc.Unanswered)
}

// tell reports whether room is yet to be told it is not read, and marks it.
func (s *syncState) tell(room string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.doc.Told {
		if r == room {
			return false
		}
	}
	s.doc.Told = append(s.doc.Told, room)
	return true
}

func (s *syncState) save(ctx context.Context) error {
	if s.store == nil {
		return nil
	}
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	s.mu.Lock()
	data, err := json.Marshal(s.doc)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.store.Save(ctx, data)
}
