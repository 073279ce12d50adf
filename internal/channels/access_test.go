package channels

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/channels/clock"
	"github.com/nanobot-go/nanobot/internal/config"
)

func TestNewAccessValidates(t *testing.T) {
	store := NewPairingStore(filepath.Join(t.TempDir(), "pairing.json"))
	tests := []struct {
		name    string
		cfg     config.Access
		store   Pairing
		wantErr string
	}{
		{"empty allowlist", config.Access{Policy: "allowlist"}, nil, "channels.test.allow_from: must not be empty"},
		{"default policy is allowlist", config.Access{}, nil, "allow_from: must not be empty"},
		{"bad policy", config.Access{Policy: "everyone", AllowFrom: []string{"1"}}, nil, "channels.test.policy"},
		{"bad group policy", config.Access{AllowFrom: []string{"1"}, GroupPolicy: "always"}, nil, "channels.test.group_policy"},
		{"pairing without store", config.Access{Policy: "pairing"}, nil, "pairing store"},
		{"pairing with empty list", config.Access{Policy: "pairing"}, store, ""},
		{"open", config.Access{Policy: "open"}, nil, ""},
		{"star", config.Access{AllowFrom: []string{"*"}}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewAccess("test", tt.cfg, tt.store)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestAccessAllowed(t *testing.T) {
	store := NewPairingStore(filepath.Join(t.TempDir(), "pairing.json"))
	tests := []struct {
		name string
		cfg  config.Access
		s    Sender
		want bool
	}{
		{"listed id", config.Access{AllowFrom: []string{"42"}}, Sender{ID: "42"}, true},
		{"unlisted id", config.Access{AllowFrom: []string{"42"}}, Sender{ID: "43"}, false},
		{"star", config.Access{AllowFrom: []string{"*"}}, Sender{ID: "43"}, true},
		{"username", config.Access{AllowFrom: []string{"@Alice"}}, Sender{ID: "7", Username: "alice"}, true},
		{"username is not an id", config.Access{AllowFrom: []string{"@alice"}}, Sender{ID: "alice"}, false},
		{"open", config.Access{Policy: "open"}, Sender{ID: "1"}, true},
		{"pairing, not approved", config.Access{Policy: "pairing"}, Sender{ID: "1"}, false},
		{"pairing, listed", config.Access{Policy: "pairing", AllowFrom: []string{"1"}}, Sender{ID: "1"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := NewAccess("test", tt.cfg, store)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := a.Allowed(tt.s); got != tt.want || err != nil {
				t.Fatalf("Allowed(%+v) = %v, %v; want %v", tt.s, got, err, tt.want)
			}
		})
	}
	a, _ := NewAccess("test", config.Access{AllowFrom: []string{"1"}}, nil)
	if a.GroupAllows(false) || !a.GroupAllows(true) {
		t.Error("group_policy mention must require addressing")
	}
	a, _ = NewAccess("test", config.Access{AllowFrom: []string{"1"}, GroupPolicy: "open"}, nil)
	if !a.GroupAllows(false) {
		t.Error("group_policy open must allow unaddressed messages")
	}
}

func TestPairingConcurrentWritersLoseNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pairing.json")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := NewPairingStore(path) // separate instances: only the file lock serialises them
			if _, err := s.Request("t", string(rune('a'+i)), "", ""); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	st, _ := NewPairingStore(path).List()
	if len(st.Pending) != 8 {
		t.Fatalf("pending = %d, want 8", len(st.Pending))
	}
}

// recordingBus is a Publisher that keeps what it got.
type recordingBus struct {
	mu  sync.Mutex
	in  []bus.InboundMessage
	out []bus.OutboundMessage
	err error
}

func (b *recordingBus) PublishInbound(_ context.Context, m bus.InboundMessage) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return b.err
	}
	b.in = append(b.in, m)
	return nil
}

func (b *recordingBus) PublishOutbound(_ context.Context, m bus.OutboundMessage) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.out = append(b.out, m)
	return nil
}

func newTestIntake(t *testing.T, cfg config.Access, ic IntakeConfig) (*Intake, *recordingBus, *PairingStore) {
	t.Helper()
	store := NewPairingStore(filepath.Join(t.TempDir(), "pairing.json"))
	a, err := NewAccess("test", cfg, store)
	if err != nil {
		t.Fatal(err)
	}
	b := &recordingBus{}
	// Limits the test leaves zero are the defaults, as the daemon maps them.
	d := config.Defaults()
	def := IntakeLimits(d.Agents, config.Access{RatePerMinute: 30})
	if ic.MaxChars == 0 {
		ic.MaxChars = def.MaxChars
	}
	if ic.RatePerMinute == 0 {
		ic.RatePerMinute = def.RatePerMinute
	}
	ic.Channel = "test"
	return NewIntake(ic, a, b, zaptest.NewLogger(t)), b, store
}

func msg(sender, id, text string) (bus.InboundMessage, *int) {
	acks := new(int)
	return bus.InboundMessage{Channel: "test", SenderID: sender, ChatID: sender, MessageID: id, Content: text, Ack: func() { *acks++ }}, acks
}

func TestIntakeGate(t *testing.T) {
	ctx := context.Background()
	in, b, _ := newTestIntake(t, config.Access{AllowFrom: []string{"1"}}, IntakeConfig{})
	tests := []struct {
		name    string
		a       func() (Arrival, *int)
		want    Verdict
		wantAck int
	}{
		{"allowed DM", func() (Arrival, *int) { m, n := msg("1", "10", "hi"); return Arrival{Msg: m}, n }, Published, 0},
		{"duplicate", func() (Arrival, *int) { m, n := msg("1", "10", "hi"); return Arrival{Msg: m}, n }, Duplicate, 1},
		{"denied", func() (Arrival, *int) { m, n := msg("2", "11", "hi"); return Arrival{Msg: m}, n }, Denied, 1},
		{"group not addressed", func() (Arrival, *int) { m, n := msg("1", "12", "hi all"); return Arrival{Msg: m, Group: true}, n }, NotAddressed, 1},
		{"group addressed", func() (Arrival, *int) {
			m, n := msg("1", "13", "bot, hi")
			return Arrival{Msg: m, Group: true, Addressed: true}, n
		}, Published, 0},
		{"whoami from stranger", func() (Arrival, *int) { m, n := msg("9", "14", "/whoami"); return Arrival{Msg: m, Username: "eve"}, n }, WhoAmI, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, acks := tt.a()
			got, err := in.Admit(ctx, a)
			if err != nil || got != tt.want || *acks != tt.wantAck {
				t.Fatalf("Admit = %v, %v, acks %d; want %v, acks %d", got, err, *acks, tt.want, tt.wantAck)
			}
		})
	}
	if len(b.in) != 2 {
		t.Fatalf("bus got %d messages, want the 2 published", len(b.in))
	}
	if b.in[0].Group != "" || b.in[1].Group != "test:1" {
		t.Fatalf("groups = %q, %q; want none for the DM, test:1 for the group", b.in[0].Group, b.in[1].Group)
	}
	m, _ := msg("1", "15", "in a guild")
	if _, err := in.Admit(ctx, Arrival{Msg: m, Group: true, GroupID: "g7", Addressed: true}); err != nil || b.in[2].Group != "test:g7" {
		t.Fatalf("group with its own id: %v, %q", err, b.in[2].Group)
	}
	if len(b.out) != 1 || !strings.Contains(b.out[0].Content, "`9`") || !strings.Contains(b.out[0].Content, "@eve") ||
		!strings.Contains(b.out[0].Content, "not on this bot's allowlist") || b.out[0].ReplyTo != "14" {
		t.Fatalf("whoami reply = %+v", b.out)
	}
}

func TestIntakePairingFlow(t *testing.T) {
	ctx := context.Background()
	in, b, store := newTestIntake(t, config.Access{Policy: "pairing"}, IntakeConfig{})
	m, _ := msg("5", "1", "hello?")
	m.SenderName = "@carol"
	if v, _ := in.Admit(ctx, Arrival{Msg: m}); v != PairingCode {
		t.Fatalf("verdict = %v, want pairing_code", v)
	}
	if len(b.in) != 0 || len(b.out) != 1 {
		t.Fatalf("bus in=%d out=%d", len(b.in), len(b.out))
	}
	st, _ := store.List()
	if len(st.Pending) != 1 || !strings.Contains(b.out[0].Content, "nanobot pairing approve "+st.Pending[0].Code) {
		t.Fatalf("reply %q does not carry the pending code %+v", b.out[0].Content, st.Pending)
	}
	// In a group, an unknown sender gets no code (it would be public).
	g, _ := msg("6", "2", "@bot hi")
	if v, _ := in.Admit(ctx, Arrival{Msg: g, Group: true, Addressed: true}); v != Denied {
		t.Fatalf("group verdict = %v, want denied", v)
	}
	if _, err := store.Approve(st.Pending[0].Code); err != nil {
		t.Fatal(err)
	}
	m2, _ := msg("5", "3", "thanks")
	if v, _ := in.Admit(ctx, Arrival{Msg: m2}); v != Published {
		t.Fatalf("after approval verdict = %v", v)
	}
}

func TestIntakeRateLimitAndLength(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake()
	in, b, _ := newTestIntake(t, config.Access{AllowFrom: []string{"1"}}, IntakeConfig{RatePerMinute: 3, MaxChars: 60, Clock: clk})
	var verdicts []string
	for i := range 5 {
		m, _ := msg("1", string(rune('a'+i)), "hi")
		v, _ := in.Admit(ctx, Arrival{Msg: m})
		verdicts = append(verdicts, v.String())
	}
	if got := strings.Join(verdicts, ","); got != "published,published,published,rate_limited,rate_limited" {
		t.Fatalf("verdicts = %s", got)
	}
	if len(b.out) != 1 || !strings.Contains(b.out[0].Content, "faster") {
		t.Fatalf("want one slow-down notice, got %+v", b.out)
	}
	clk.Advance(time.Minute)
	m, _ := msg("1", "z", strings.Repeat("0123456789", 10))
	if v, _ := in.Admit(ctx, Arrival{Msg: m}); v != Published {
		t.Fatalf("after a minute: %v", v)
	}
	// The text and its note fit the limit together, so the agent, which
	// applies the same limit, does not cut the note off.
	last := b.in[len(b.in)-1].Content
	if last != "012345678901\n\n[message truncated: 12 of 100 characters kept]" || utf8.RuneCountInString(last) > 60 {
		t.Fatalf("truncated = %q (%d runes)", last, utf8.RuneCountInString(last))
	}
}

func TestIntakePrepareRunsOnlyForAdmitted(t *testing.T) {
	in, b, _ := newTestIntake(t, config.Access{AllowFrom: []string{"1"}}, IntakeConfig{})
	prepared := 0
	prep := func(_ context.Context, m *bus.InboundMessage) error {
		prepared++
		if m.Content == "" {
			return errors.New("nothing to say")
		}
		m.Content += " [with photo]"
		return nil
	}
	stranger, _ := msg("2", "1", "photo")
	if v, _ := in.Admit(context.Background(), Arrival{Msg: stranger, Prepare: prep}); v != Denied || prepared != 0 {
		t.Fatalf("stranger: %v, prepared %d; want denied before any download", v, prepared)
	}
	ok, _ := msg("1", "2", "look")
	if v, _ := in.Admit(context.Background(), Arrival{Msg: ok, Prepare: prep}); v != Published || b.in[0].Content != "look [with photo]" {
		t.Fatalf("allowed: %v %+v", v, b.in)
	}
	empty, acks := msg("1", "3", "")
	if v, _ := in.Admit(context.Background(), Arrival{Msg: empty, Prepare: prep}); v != Dropped || *acks != 1 {
		t.Fatalf("empty: %v acks %d; want dropped and acked", v, *acks)
	}
	// Nothing the user sent is lost without a word: both drops were answered.
	if len(b.out) != 1 || b.out[0].Content != unreadable || b.out[0].ReplyTo != "3" {
		t.Fatalf("replies %+v, want the unreadable note answering message 3", b.out)
	}
	// A message with nothing readable and no Prepare is answered too.
	bare, _ := msg("1", "4", "  ")
	if v, _ := in.Admit(context.Background(), Arrival{Msg: bare}); v != Dropped || len(b.out) != 2 {
		t.Fatalf("bare: %v, replies %+v", v, b.out)
	}
}

func TestIntakePublishFailureIsNotAcked(t *testing.T) {
	in, b, _ := newTestIntake(t, config.Access{AllowFrom: []string{"1"}}, IntakeConfig{})
	b.err = bus.ErrClosed
	m, acks := msg("1", "1", "hi")
	if _, err := in.Admit(context.Background(), Arrival{Msg: m}); !errors.Is(err, bus.ErrClosed) || *acks != 0 {
		t.Fatalf("err = %v, acks = %d; want ErrClosed and no ack", err, *acks)
	}
}

func TestLRUEvictsOldest(t *testing.T) {
	c := newLRU[int, int](2)
	c.put(1, 1)
	c.put(2, 2)
	c.get(1)
	c.put(3, 3)
	if _, ok := c.get(2); ok {
		t.Fatal("2 should have been evicted")
	}
	if _, ok := c.get(1); !ok || c.len() != 2 {
		t.Fatal("1 should have stayed")
	}
}
