package channels

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nanobot-go/nanobot/internal/atomicfile"
	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/filelock"
)

// ErrUnknownCode is returned by Approve for a code that was never issued or
// has expired; the owner should ask the sender to write to the bot again.
var ErrUnknownCode = errors.New("unknown or expired pairing code")

// PairingRequest is a code handed to an unknown sender, waiting for the owner.
type PairingRequest struct {
	Code       string    `json:"code"`
	Channel    string    `json:"channel"`
	SenderID   string    `json:"sender_id"`
	SenderName string    `json:"sender_name,omitempty"`
	ChatID     string    `json:"chat_id,omitempty"`
	Created    time.Time `json:"created"`
}

// Approval is a sender the owner let in.
type Approval struct {
	Channel    string    `json:"channel"`
	SenderID   string    `json:"sender_id"`
	SenderName string    `json:"sender_name,omitempty"`
	ApprovedAt time.Time `json:"approved_at"`
}

// PairingState is the store's content.
type PairingState struct {
	Pending  []PairingRequest `json:"pending"`
	Approved []Approval       `json:"approved"`
}

// Pairing is what the channels, the web panel, the daemon's /web links and
// the `nanobot pairing` CLI need of a pairing store. PairingStore keeps it in
// a JSON file; internal/channels/pairingkv in a JetStream KV bucket shared by
// the processes of a scaled-out deployment. Both keep the same rules: a
// sender has at most one valid code, a code expires after a TTL and is usable
// once, pending codes are capped (the oldest dropped), approvals are per
// channel and sender.
type Pairing interface {
	// Request returns a pairing code for sender on channel: the pending one
	// if it is still valid, otherwise a new one.
	Request(channel, senderID, senderName, chatID string) (string, error)
	// Approve lets the sender who was given code in; ErrUnknownCode when
	// the code is not pending (never issued, expired, used or denied).
	Approve(code string) (Approval, error)
	// Deny drops a pending code without letting its sender in.
	Deny(code string) (PairingRequest, error)
	// Revoke removes an approval; it reports whether there was one.
	Revoke(channel, senderID string) (bool, error)
	// List returns the valid pending codes, oldest first, and the approvals.
	List() (PairingState, error)
	// IsApproved reports whether sender was approved on channel. It is
	// called for every inbound message, so it must not do network I/O.
	IsApproved(channel, senderID string) (bool, error)
}

var _ Pairing = (*PairingStore)(nil)

// PairingStore keeps pairing codes and approvals in a small JSON file (e.g.
// ~/.nanobot/pairing.json), shared by the daemon, which issues codes, and the
// `nanobot pairing` CLI, which approves and revokes them. Writes are atomic
// (temp file, fsync, rename; mode 0600) and, on Unix, serialised across
// processes with a lock file next to it.
type PairingStore struct {
	path string
	// TTL is how long a code stays valid [1h]; MaxPending caps pending codes
	// [64], the oldest dropped first, so strangers cannot grow the file.
	TTL        time.Duration
	MaxPending int
	// Clock is the time codes expire by [clock.System]; tests move it.
	Clock clock.Clock

	mu     sync.Mutex
	cached *PairingState
	stamp  fileStamp
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// NewPairingStore returns a store backed by path. It does no I/O.
func NewPairingStore(path string) *PairingStore {
	return &PairingStore{path: path, TTL: time.Hour, MaxPending: 64, Clock: clock.System{}}
}

// Path returns the file's path.
func (s *PairingStore) Path() string { return s.path }

// Request returns a pairing code for sender on channel: the pending one if it
// is still valid, otherwise a new one.
func (s *PairingStore) Request(channel, senderID, senderName, chatID string) (string, error) {
	var code string
	err := s.update(func(st *PairingState) error {
		for _, p := range st.Pending {
			if p.Channel == channel && p.SenderID == senderID {
				code = p.Code
				return nil
			}
		}
		c, err := NewPairingCode()
		if err != nil {
			return err
		}
		code = c
		st.Pending = append(st.Pending, PairingRequest{Code: c, Channel: channel, SenderID: senderID,
			SenderName: senderName, ChatID: chatID, Created: s.Clock.Now().UTC()})
		if over := len(st.Pending) - s.MaxPending; over > 0 {
			st.Pending = st.Pending[over:]
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("pairing: request code: %w", err)
	}
	return code, nil
}

// Approve lets the sender who was given code in.
func (s *PairingStore) Approve(code string) (Approval, error) {
	code = NormalizePairingCode(code)
	var a Approval
	err := s.update(func(st *PairingState) error {
		p, err := takePending(st, code)
		if err != nil {
			return err
		}
		a = p.Approval(s.Clock.Now())
		st.Approved = slices.DeleteFunc(st.Approved, func(o Approval) bool {
			return o.Channel == a.Channel && o.SenderID == a.SenderID
		})
		st.Approved = append(st.Approved, a)
		return nil
	})
	if err != nil {
		return Approval{}, fmt.Errorf("pairing: approve %s: %w", code, err)
	}
	return a, nil
}

// Deny drops a pending code without letting its sender in; the sender can
// ask again later and gets a new code.
func (s *PairingStore) Deny(code string) (PairingRequest, error) {
	code = NormalizePairingCode(code)
	var p PairingRequest
	err := s.update(func(st *PairingState) (err error) {
		p, err = takePending(st, code)
		return err
	})
	if err != nil {
		return PairingRequest{}, fmt.Errorf("pairing: deny %s: %w", code, err)
	}
	return p, nil
}

// takePending removes the pending request of code from st, or fails with
// ErrUnknownCode.
func takePending(st *PairingState, code string) (PairingRequest, error) {
	i := slices.IndexFunc(st.Pending, func(p PairingRequest) bool { return p.Code == code })
	if i < 0 {
		return PairingRequest{}, ErrUnknownCode
	}
	p := st.Pending[i]
	st.Pending = slices.Delete(st.Pending, i, i+1)
	return p, nil
}

// Revoke removes an approval; it reports whether there was one.
func (s *PairingStore) Revoke(channel, senderID string) (bool, error) {
	found := false
	err := s.update(func(st *PairingState) error {
		n := len(st.Approved)
		st.Approved = slices.DeleteFunc(st.Approved, func(o Approval) bool {
			return o.Channel == channel && o.SenderID == senderID
		})
		found = len(st.Approved) != n
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("pairing: revoke %s:%s: %w", channel, senderID, err)
	}
	return found, nil
}

// List returns the valid pending codes and the approvals.
func (s *PairingStore) List() (PairingState, error) {
	st, err := s.read()
	if err != nil {
		return PairingState{}, fmt.Errorf("pairing: list: %w", err)
	}
	return st, nil
}

// IsApproved reports whether sender was approved on channel. It rereads the
// file only when it changed, so calling it per message is cheap.
func (s *PairingStore) IsApproved(channel, senderID string) (bool, error) {
	st, err := s.read()
	if err != nil {
		return false, fmt.Errorf("pairing: check %s:%s: %w", channel, senderID, err)
	}
	return slices.ContainsFunc(st.Approved, func(a Approval) bool {
		return a.Channel == channel && a.SenderID == senderID
	}), nil
}

// read returns the state, from the cache when the file did not change.
func (s *PairingStore) read() (PairingState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.loadLocked()
	if err != nil {
		return PairingState{}, err
	}
	return clonePairing(*st), nil
}

func (s *PairingStore) loadLocked() (*PairingState, error) {
	fi, err := os.Stat(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		s.cached, s.stamp = &PairingState{}, fileStamp{}
		return s.cached, nil
	}
	if err != nil {
		return nil, err
	}
	stamp := fileStamp{fi.ModTime(), fi.Size()}
	if s.cached != nil && stamp == s.stamp {
		s.expireLocked(s.cached)
		return s.cached, nil
	}
	data, err := os.ReadFile(s.path)
	if err != nil {
		return nil, err
	}
	var st PairingState
	if len(strings.TrimSpace(string(data))) > 0 {
		if err := json.Unmarshal(data, &st); err != nil {
			return nil, fmt.Errorf("%s: %w", s.path, err)
		}
	}
	s.expireLocked(&st)
	s.cached, s.stamp = &st, stamp
	return s.cached, nil
}

func (s *PairingStore) expireLocked(st *PairingState) {
	cutoff := s.Clock.Now().Add(-s.TTL)
	st.Pending = slices.DeleteFunc(st.Pending, func(p PairingRequest) bool { return p.Created.Before(cutoff) })
}

// update applies fn to the current state under the cross-process lock and
// writes the result atomically.
func (s *PairingStore) update(fn func(*PairingState) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return err
	}
	unlock, err := filelock.Acquire(s.path + ".lock")
	if err != nil {
		return err
	}
	defer unlock()
	s.cached = nil // another process may have written since our last read
	cur, err := s.loadLocked()
	if err != nil {
		return err
	}
	st := clonePairing(*cur)
	if err := fn(&st); err != nil {
		return err
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(s.path, append(data, '\n'), 0o600); err != nil {
		return err
	}
	s.cached = nil
	return nil
}

func clonePairing(st PairingState) PairingState {
	return PairingState{Pending: slices.Clone(st.Pending), Approved: slices.Clone(st.Approved)}
}

// Approval is what approving p at now lets in.
func (p PairingRequest) Approval(now time.Time) Approval {
	return Approval{Channel: p.Channel, SenderID: p.SenderID, SenderName: p.SenderName, ApprovedAt: now.UTC()}
}

// NormalizePairingCode is code as issued: the owner may type it in lower
// case, or paste it with blanks around.
func NormalizePairingCode(code string) string { return strings.ToUpper(strings.TrimSpace(code)) }

// codeAlphabet leaves out characters that are easy to misread (0/O, 1/I/L).
const codeAlphabet = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"

// NewPairingCode returns a random code of 8 characters of codeAlphabet,
// for every pairing store.
func NewPairingCode() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	for i := range b {
		b[i] = codeAlphabet[int(b[i])%len(codeAlphabet)]
	}
	return string(b[:]), nil
}
