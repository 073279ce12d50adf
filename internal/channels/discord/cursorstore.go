package discord

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/nanobot-go/nanobot/internal/atomicfile"
	"github.com/nanobot-go/nanobot/internal/channels"
)

// CursorStore keeps the cursors' document (cursors.go): the JSON of every
// tracked chat, replaced whole at each save. The adapter keeps the cursors
// in memory; a store only persists them. The default is a file in the data
// dir (FileCursorStore); a channels process scaled out over NATS keeps them
// in a JetStream KV bucket (internal/channels/cursorkv), so it catches up
// on another host too.
type CursorStore = channels.StateStore

// saveTimeout bounds one save, so a store whose backend is down (NATS)
// delays a first tracking or a shutdown ack by at most this, never blocks
// them.
const saveTimeout = 5 * time.Second

// FileCursorStore keeps the document in a file, rewritten atomically (and
// fsync'd) by each save.
type FileCursorStore struct{ Path string }

var _ CursorStore = FileCursorStore{}

// Load reads the file; a missing file is no document.
func (f FileCursorStore) Load(context.Context) ([]byte, bool, error) {
	data, err := os.ReadFile(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", f.Path, err)
	}
	return data, true, nil
}

// Save replaces the file atomically.
func (f FileCursorStore) Save(_ context.Context, data []byte) error {
	return atomicfile.Write(f.Path, data, 0o600)
}

// String names the file in logs.
func (f FileCursorStore) String() string { return f.Path }
