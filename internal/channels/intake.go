package channels

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/clock"
	"github.com/nanobot-go/nanobot/internal/commands"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/usage"
)

// Publisher is the part of the bus the intake needs: inbound messages for
// the agent, and short replies it answers itself (/whoami, pairing codes).
type Publisher interface {
	PublishInbound(ctx context.Context, m bus.InboundMessage) error
	PublishOutbound(ctx context.Context, m bus.OutboundMessage) error
}

// IntakeConfig bounds what a sender can push onto the bus. MaxChars and
// RatePerMinute come from config (IntakeLimits maps them) and are taken as
// given; the other fields are internal bounds no key carries, and zero takes
// the constant named on each.
type IntakeConfig struct {
	// Channel is the channel's name on the bus.
	Channel string
	// MaxChars caps one message's text in runes (agents.max_input_chars);
	// longer text is cut with a note.
	MaxChars int
	// RatePerMinute caps messages per sender per minute
	// (channels.<name>.rate_per_minute).
	RatePerMinute int
	// DedupeSize is how many recent message ids are remembered
	// [DefaultDedupeSize].
	DedupeSize int
	// Senders is how many senders' rate counters are kept [DefaultSenders].
	Senders int
	Clock   clock.Clock
}

// IntakeLimits is the intake config of a channel with access a under the
// agent settings agents: the one mapping from config to the gate, used by
// the daemon and by tests (with config.Defaults()).
func IntakeLimits(agents config.AgentsConfig, a config.Access) IntakeConfig {
	return IntakeConfig{MaxChars: agents.MaxInputChars, RatePerMinute: a.RatePerMinute}
}

// DefaultDedupeSize is how many recent message ids the intake remembers to
// drop a platform's redelivery. Not a config key: it only has to cover the
// redelivery window of a reconnect, which a few thousand ids do.
const DefaultDedupeSize = 4096

// DefaultSenders is how many senders' rate windows are kept (least recently
// seen evicted). Not a config key: it bounds memory against a flood of
// distinct senders, whose windows a real deployment never needs all of.
const DefaultSenders = 4096

// Arrival is a platform message on its way in, with the facts the gate
// needs that the bus message does not carry.
type Arrival struct {
	Msg bus.InboundMessage
	// Username is the sender's @name without "@", for username allowlists.
	Username string
	// Group is true for group and guild messages, false for DMs.
	Group bool
	// GroupID identifies the group when Group is set (a Discord guild id);
	// empty means the chat is the group (a Telegram group).
	GroupID string
	// Addressed is true when a group message mentions the bot, replies to
	// it, or is a command meant for it.
	Addressed bool
	// Said, when set, is the message as its sender wrote it; the intake
	// renders it (Render) into Msg.Content once the sender passed the gate,
	// replacing what Content held. Commands are read from Said.Text.
	Said *Incoming
	// Prepare, when set, runs only for a message that passed the gate,
	// before it is published: downloading media, transcribing voice. So a
	// stranger's attachments are never fetched. An error drops the message
	// (Prepare tells the user why, if it should).
	Prepare func(ctx context.Context, m *bus.InboundMessage) error
}

// Verdict says what the intake did with an arrival.
type Verdict int

const (
	Published    Verdict = iota // queued for the agent
	Duplicate                   // seen before (platform redelivery)
	NotAddressed                // a group message not meant for the bot
	RateLimited                 // the sender is over the per-minute limit
	WhoAmI                      // /whoami, answered by the channel layer
	PairingCode                 // unknown DM sender under pairing: sent a code
	Denied                      // sender not allowed: dropped without a word
	Dropped                     // nothing usable in it, or Prepare refused it: the sender is told
)

func (v Verdict) String() string {
	return [...]string{"published", "duplicate", "not_addressed", "rate_limited", "whoami", "pairing_code", "denied", "dropped"}[v]
}

// Intake is the inbound gate every adapter passes platform messages
// through. In order: dedupe by message id, group gating, per-sender rate
// limit, /whoami, access policy (pairing codes), Prepare, length cap, then
// publish.
// Nothing that is not Published reaches the bus, so strangers cost no LLM
// call; those arrivals are acknowledged (Ack) as deliberately dropped.
type Intake struct {
	cfg    IntakeConfig
	access *Access
	pub    Publisher
	log    *zap.Logger

	mu    sync.Mutex
	seen  *lru[string, struct{}]
	rates *lru[string, *rateWindow]
}

type rateWindow struct {
	start  time.Time
	count  int
	warned bool
}

// NewIntake returns the gate for one channel.
func NewIntake(cfg IntakeConfig, access *Access, pub Publisher, log *zap.Logger) *Intake {
	if cfg.DedupeSize <= 0 {
		cfg.DedupeSize = DefaultDedupeSize
	}
	if cfg.Senders <= 0 {
		cfg.Senders = DefaultSenders
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	return &Intake{
		cfg: cfg, access: access, pub: pub, log: log,
		seen:  newLRU[string, struct{}](cfg.DedupeSize),
		rates: newLRU[string, *rateWindow](cfg.Senders),
	}
}

// Admit runs a through the gate. It returns an error only when publishing
// failed (e.g. the bus closed); the message is then not acknowledged, so a
// platform that redelivers will.
func (in *Intake) Admit(ctx context.Context, a Arrival) (Verdict, error) {
	v, err := in.admit(ctx, a)
	if err != nil {
		return v, err
	}
	if v != Published && a.Msg.Ack != nil {
		a.Msg.Ack()
	}
	if v != Published {
		in.log.Debug("inbound message not published", zap.String("verdict", v.String()),
			zap.String("sender", a.Msg.SenderID), zap.String("chat", a.Msg.ChatID))
	}
	return v, nil
}

func (in *Intake) admit(ctx context.Context, a Arrival) (Verdict, error) {
	m := a.Msg
	if m.Channel == "" {
		m.Channel = in.cfg.Channel
	}
	if a.Said != nil {
		m.Content = strings.TrimSpace(a.Said.Text) // commands are read from the text alone
	}
	if m.MessageID != "" && in.duplicate(m.ChatID+"/"+m.MessageID) {
		return Duplicate, nil
	}
	if a.Group && !in.access.GroupAllows(a.Addressed) {
		return NotAddressed, nil
	}
	if a.Group {
		id := a.GroupID
		if id == "" {
			id = m.ChatID
		}
		m.Group = m.Channel + ":" + id
	}
	sender := Sender{ID: m.SenderID, Username: a.Username}
	allowed, err := in.access.Allowed(sender)
	if err != nil {
		// A broken pairing file must not open the bot; log and deny.
		in.log.Error("access check failed; treating sender as not allowed", zap.String("sender", m.SenderID), zap.Error(err))
		allowed = false
	}
	if over, warn := in.overRate(m.SenderID); over {
		if warn && allowed {
			in.reply(ctx, m, "You are sending messages faster than I can read them. Please wait a minute.")
		}
		return RateLimited, nil
	}
	// The commands the table gives to the intake are answered before the
	// access check, so a stranger can use them (internal/commands).
	if c, _, ok := commands.Parse(m.Content); ok && c.Handler == commands.Intake {
		in.reply(ctx, m, intakeAnswer(c, m, a.Username, allowed))
		return WhoAmI, nil
	}
	if !allowed {
		if in.access.Policy() == PolicyPairing && !a.Group {
			code, err := in.access.pairing.Request(in.cfg.Channel, m.SenderID, m.SenderName, m.ChatID)
			if err != nil {
				in.log.Error("pairing code not issued", zap.String("sender", m.SenderID), zap.Error(err))
				return Denied, nil
			}
			in.log.Info("pairing code issued", zap.String("sender", m.SenderID), zap.String("name", m.SenderName))
			in.reply(ctx, m, fmt.Sprintf("Hi! This bot is private. To get access, ask its owner to run:\n\n`nanobot pairing approve %s`", code))
			return PairingCode, nil
		}
		return Denied, nil
	}
	if a.Said != nil {
		m.Content = Render(*a.Said)
	}
	if a.Prepare != nil {
		// What Prepare calls (a transcription) serves this chat: its usage
		// is recorded under the chat and held to its per-chat limit.
		key := m.Key()
		pctx := usage.WithCall(ctx, usage.Call{Origin: usage.OriginTranscription, Session: key, Chat: usage.ChatOf(key)})
		if err := a.Prepare(pctx, &m); err != nil {
			in.log.Info("inbound message dropped while preparing it", zap.String("sender", m.SenderID), zap.Error(err))
			if !errors.Is(err, ErrAnswered) {
				in.reply(ctx, m, unreadable)
			}
			return Dropped, nil
		}
	}
	if strings.TrimSpace(m.Content) == "" && len(m.Media) == 0 {
		// Nothing the user sent is lost without a word
		// (docs/channels.md#what-each-message-kind-becomes).
		in.log.Info("inbound message with nothing readable", zap.String("sender", m.SenderID))
		in.reply(ctx, m, unreadable)
		return Dropped, nil
	}
	if n := utf8.RuneCountInString(m.Content); n > in.cfg.MaxChars {
		m.Content = truncate(m.Content, n, in.cfg.MaxChars)
	}
	if err := in.pub.PublishInbound(ctx, m); err != nil {
		return Published, fmt.Errorf("%s: publish inbound: %w", in.cfg.Channel, err)
	}
	return Published, nil
}

// ErrAnswered is what Prepare returns to drop a message whose sender it
// already told why (e.g. "transcription is off"); any other error is
// answered with the intake's own note.
var ErrAnswered = errors.New("message dropped; the sender was told why")

// unreadable is the reply to a message in which nothing could be read.
const unreadable = "I got your message, but there is nothing in it I can read: no text, and nothing attached that I understand."

func (in *Intake) duplicate(key string) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if _, ok := in.seen.get(key); ok {
		return true
	}
	in.seen.put(key, struct{}{})
	return false
}

// overRate counts a message against its sender's one-minute window; warn is
// true the first time the sender goes over within a window.
func (in *Intake) overRate(sender string) (over, warn bool) {
	now := in.cfg.Clock.Now()
	in.mu.Lock()
	defer in.mu.Unlock()
	w, ok := in.rates.get(sender)
	if !ok || now.Sub(w.start) >= time.Minute {
		w = &rateWindow{start: now}
		in.rates.put(sender, w)
	}
	w.count++
	if w.count <= in.cfg.RatePerMinute {
		return false, false
	}
	warn = !w.warned
	w.warned = true
	return true, warn
}

// reply sends a short answer from the channel layer itself.
func (in *Intake) reply(ctx context.Context, m bus.InboundMessage, text string) {
	err := in.pub.PublishOutbound(ctx, bus.OutboundMessage{
		Channel: m.Channel, ChatID: m.ChatID, Kind: bus.KindMessage, Content: text,
		ReplyTo: m.MessageID, Metadata: m.Metadata,
	})
	if err != nil {
		in.log.Warn("channel reply not queued", zap.String("chat", m.ChatID), zap.Error(err))
	}
}

func whoamiText(m bus.InboundMessage, username string, allowed bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Your user id: `%s`", m.SenderID)
	// A Matrix id is its own @name: said once.
	if username != "" && "@"+username != m.SenderID {
		fmt.Fprintf(&b, " (@%s)", username)
	}
	fmt.Fprintf(&b, "\nThis chat: `%s`", m.ChatID)
	if !allowed {
		b.WriteString("\n\nYou are not on this bot's allowlist. Its owner can add your user id to `allow_from`.")
	}
	return b.String()
}

// intakeAnswer is the reply to a command the intake answers.
func intakeAnswer(c commands.Command, m bus.InboundMessage, username string, allowed bool) string {
	if c.Name == "whoami" {
		return whoamiText(m, username, allowed)
	}
	// A row given to the intake without its answer here;
	// TestIntakeAnswersItsCommands catches it.
	return "I know /" + c.Name + " but cannot answer it here."
}

// truncate cuts s, which has n runes, so that the result with its note is
// at most limit runes: the agent applies the same limit and would cut the
// note off otherwise.
func truncate(s string, n, limit int) string {
	for keep := limit; ; keep-- {
		note := fmt.Sprintf("\n\n[message truncated: %d of %d characters kept]", keep, n)
		if keep <= 0 || keep+utf8.RuneCountInString(note) <= limit {
			return truncateRunes(s, max(keep, 0)) + note
		}
	}
}

func truncateRunes(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}
