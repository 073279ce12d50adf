package agent

import (
	"fmt"
	"time"

	"github.com/nanobot-go/nanobot/internal/bus"
)

// Attribution: a burst of messages that waited for a busy session becomes
// one follow-up turn (docs/architecture.md#one-message-end-to-end), and in a
// group that burst may come from several people. The model must see who
// asked what, so a merged message names each part's author and time
// (docs/sessions.md#a-busy-chat); a burst from one person reads as one
// message, as before.

// sender is who wrote a message: the platform's stable id and the name the
// model is told.
type sender struct{ id, name string }

// senderOf is the one place that reads a message's author from the bus
// message, so a richer author (a channel's display name and @username)
// changes only here.
func senderOf(m bus.InboundMessage) sender {
	return sender{id: m.SenderID, name: m.SenderName}
}

// key identifies the person: the platform id when there is one (two people
// may share a display name), else the name.
func (s sender) key() string {
	if s.id != "" {
		return "id:" + s.id
	}
	return "name:" + s.name
}

// authors are the distinct senders of a batch, with the label each one is
// given.
type authors struct {
	labels map[string]string // by sender key
}

// authorsOf labels the batch's senders: by name, the id added where two
// people share one, or "user <id>" for a sender without a name.
func authorsOf(batch []bus.InboundMessage) authors {
	a := authors{labels: map[string]string{}}
	byName := map[string]int{}
	for _, m := range batch {
		s := senderOf(m)
		if _, ok := a.labels[s.key()]; ok {
			continue
		}
		a.labels[s.key()] = s.name
		byName[s.name]++
	}
	for _, m := range batch {
		s := senderOf(m)
		switch {
		case s.name == "" && s.id != "":
			a.labels[s.key()] = "user " + s.id
		case s.name == "":
			a.labels[s.key()] = "someone"
		case byName[s.name] > 1 && s.id != "":
			a.labels[s.key()] = fmt.Sprintf("%s (id %s)", s.name, s.id)
		}
	}
	return a
}

func (a authors) count() int { return len(a.labels) }

// one reports whether a single person wrote the whole batch.
func (a authors) one() bool { return len(a.labels) <= 1 }

// header opens m's part of a merged message: its author, and when it was
// sent (the time in now's zone, with the date when it is not today's).
func (a authors) header(m bus.InboundMessage, now time.Time) string {
	label := a.labels[senderOf(m).key()]
	if m.Time.IsZero() {
		return "[" + label + "]"
	}
	t := m.Time.In(now.Location())
	layout := "15:04"
	if y, mo, d := t.Date(); y != now.Year() || mo != now.Month() || d != now.Day() {
		layout = "Mon 2006-01-02 15:04"
	}
	return "[" + label + " · " + t.Format(layout) + "]"
}
