package web

import (
	"encoding/json"
	"strings"
	"sync"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/llm"
)

// streamBuffer is how many events may wait for one slow page; a page that
// falls further behind is disconnected and catches up when it reconnects.
const streamBuffer = 256

// historyLimit is how many of a conversation's latest messages a hello
// carries.
const historyLimit = 200

// hub fans the web channel's outbound messages out to the open pages, and
// keeps each conversation's turn in flight so that a page that connects
// mid-turn sees it.
type hub struct {
	sessions Sessions
	files    *sentFiles

	mu     sync.Mutex
	chats  map[string]*chatState
	closed bool
}

type chatState struct {
	mu     sync.Mutex
	turn   string // the turn in flight, "" when idle
	draft  string // its reply so far, rendered
	status string // its last tool hint
	// notes are what the message tool sent during the turn in flight: a
	// page connecting before the turn is stored sees them in its hello.
	notes []wireMessage
	subs  map[*subscriber]struct{}
	// dead marks a state dropped from the hub: whoever locked it late
	// looks the chat up again.
	dead bool
}

type subscriber struct {
	ch chan []byte
}

// event is one frame of the stream.
type event struct {
	Type string `json:"type"`
	Turn string `json:"turn,omitempty"`
	HTML string `json:"html,omitempty"`
	Text string `json:"text,omitempty"`
	// N is how many messages the session holds once a final arrived: a
	// page whose hello already counted them has the reply, and drops its
	// draft instead of showing the answer twice.
	N     int  `json:"n,omitempty"`
	Error bool `json:"error,omitempty"`
	// Files are the files a message (or final) carried.
	Files []sentFile `json:"files,omitempty"`
}

// hello is the first frame of every (re)connection.
type hello struct {
	Type     string        `json:"type"`
	N        int           `json:"n"`
	Messages []wireMessage `json:"messages"`
	Turn     string        `json:"turn,omitempty"`
	Draft    string        `json:"draft,omitempty"`
	Status   string        `json:"status,omitempty"`
}

// wireMessage is one stored message as the page shows it.
type wireMessage struct {
	Role  string   `json:"role"`
	Text  string   `json:"text,omitempty"` // user text, shown as text
	HTML  string   `json:"html,omitempty"` // assistant text, rendered
	IDs   []string `json:"ids,omitempty"`  // the user message's client ids
	Files []string `json:"files,omitempty"`
	Tools []string `json:"tools,omitempty"`
	// Sent are the files of an assistant's message (the message tool's).
	Sent []sentFile `json:"sent,omitempty"`
}

func newHub(s Sessions, files *sentFiles) *hub {
	return &hub{sessions: s, files: files, chats: map[string]*chatState{}}
}

// lock returns the chat's state, locked (nil when there is none and create
// is false, or the hub is closed).
func (h *hub) lock(id string, create bool) *chatState {
	for {
		h.mu.Lock()
		c, ok := h.chats[id]
		if !ok && create && !h.closed {
			c = &chatState{subs: map[*subscriber]struct{}{}}
			h.chats[id] = c
		}
		h.mu.Unlock()
		if c == nil {
			return nil
		}
		c.mu.Lock()
		if !c.dead {
			return c
		}
		c.mu.Unlock()
	}
}

// receive applies one outbound message of the web channel. It never waits
// for a page.
func (h *hub) receive(m bus.OutboundMessage) {
	ev := event{Turn: m.TurnID}
	switch m.Kind {
	case bus.KindStart:
		ev.Type = "start"
	case bus.KindDraft:
		ev.Type, ev.HTML = "draft", renderMarkdown(m.Content)
	case bus.KindStatus:
		ev.Type, ev.Text = "status", m.Content
	case bus.KindFinal:
		ev.Type, ev.Error = "final", m.IsError
		if strings.TrimSpace(m.Content) != "" {
			ev.HTML = renderMarkdown(m.Content)
		}
		if !m.IsError {
			ev.N = h.storedAnswer(m.ChatID, m.Content)
		}
		ev.Files = h.files.parts(m.ChatID, m.Media)
	default:
		ev.Type, ev.HTML = "message", renderMarkdown(m.Content)
		ev.Files = h.files.parts(m.ChatID, m.Media)
	}
	frame := sseFrame(ev)
	c := h.lock(m.ChatID, true)
	if c == nil {
		return
	}
	defer c.mu.Unlock()
	switch m.Kind {
	case bus.KindStart:
		c.turn, c.draft, c.status, c.notes = m.TurnID, "", "", nil
	case bus.KindDraft:
		c.turn, c.draft = m.TurnID, ev.HTML
	case bus.KindStatus:
		c.turn, c.status = m.TurnID, m.Content
	case bus.KindFinal:
		c.turn, c.draft, c.status, c.notes = "", "", "", nil
	case bus.KindMessage:
		if c.turn != "" {
			c.notes = append(c.notes, wireMessage{Role: "assistant", HTML: ev.HTML, Sent: ev.Files})
		}
	}
	for s := range c.subs {
		select {
		case s.ch <- frame:
		default:
			// Too slow: cut it off; its page reconnects and catches up.
			delete(c.subs, s)
			close(s.ch)
		}
	}
	if c.turn == "" && len(c.subs) == 0 {
		h.forget(m.ChatID, c)
	}
}

// storedAnswer returns how many messages the session holds when its last
// one is the answer content (the final of a turn is published after its
// messages were stored), else 0: the page can then tell whether a hello
// already showed it.
func (h *hub) storedAnswer(id, content string) int {
	snap, err := h.sessions.Get(key(id))
	if err != nil || len(snap.Messages) == 0 {
		return 0
	}
	last := snap.Messages[len(snap.Messages)-1]
	if last.Role != llm.RoleAssistant || strings.TrimSpace(textOf(last)) != strings.TrimSpace(content) {
		return 0
	}
	return len(snap.Messages)
}

func textOf(m llm.Message) string {
	var b strings.Builder
	for _, p := range m.Parts {
		if p.Kind == llm.PartText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// forget drops an idle chat's state; c.mu is held.
func (h *hub) forget(id string, c *chatState) {
	c.dead = true
	h.mu.Lock()
	if h.chats[id] == c {
		delete(h.chats, id)
	}
	h.mu.Unlock()
}

// subscribe registers a page for conversation id and returns its hello
// frame; after close it returns errClosed.
func (h *hub) subscribe(id string) (*subscriber, []byte, error) {
	c := h.lock(id, true)
	if c == nil {
		return nil, nil, errClosed
	}
	defer c.mu.Unlock()
	snap, err := h.sessions.Get(key(id))
	if err != nil {
		if c.turn == "" && len(c.subs) == 0 {
			h.forget(id, c)
		}
		return nil, nil, err
	}
	hl := hello{Type: "hello", N: len(snap.Messages), Messages: h.wireMessages(id, snap.Messages)}
	// Once the session's last message is an answer, the turn in flight is
	// stored (its final is on the way): the hello already shows it.
	stored := len(snap.Messages) > 0 && snap.Messages[len(snap.Messages)-1].Role == llm.RoleAssistant
	if c.turn != "" && !stored {
		hl.Turn, hl.Draft, hl.Status = c.turn, c.draft, c.status
		hl.Messages = append(hl.Messages, c.notes...)
	}
	s := &subscriber{ch: make(chan []byte, streamBuffer)}
	c.subs[s] = struct{}{}
	return s, sseFrame(hl), nil
}

func (h *hub) unsubscribe(id string, s *subscriber) {
	c := h.lock(id, false)
	if c == nil {
		return
	}
	defer c.mu.Unlock()
	if _, ok := c.subs[s]; ok {
		delete(c.subs, s)
		close(s.ch)
	}
	if c.turn == "" && len(c.subs) == 0 {
		h.forget(id, c)
	}
}

// close ends every stream and refuses new ones (shutdown).
func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	chats := h.chats
	h.chats = map[string]*chatState{}
	h.mu.Unlock()
	for _, c := range chats {
		c.mu.Lock()
		c.dead = true
		for s := range c.subs {
			delete(c.subs, s)
			close(s.ch)
		}
		c.mu.Unlock()
	}
}

func sseFrame(v any) []byte {
	data, _ := json.Marshal(v) // plain structs of strings and ints: cannot fail
	b := make([]byte, 0, len(data)+8)
	b = append(b, "data: "...)
	b = append(b, data...)
	return append(b, "\n\n"...)
}

// wireMessages turns the latest stored messages of conversation id into
// what the page shows. What the message tool sent here is part of the
// record (docs/reliability.md#every-turn-ends-with-something-to-read): each
// such call is shown as the message it sent, files included, after the text of
// the answer that made it.
func (h *hub) wireMessages(id string, msgs []llm.Message) []wireMessage {
	if len(msgs) > historyLimit {
		msgs = msgs[len(msgs)-historyLimit:]
	}
	failed := failedCalls(msgs)
	out := make([]wireMessage, 0, len(msgs))
	for _, m := range msgs {
		switch m.Role {
		case llm.RoleUser:
			w := wireMessage{Role: "user"}
			var text []string
			for _, p := range m.Parts {
				switch p.Kind {
				case llm.PartText:
					text = append(text, p.Text)
				case llm.PartImage:
					w.Files = append(w.Files, "picture")
				case llm.PartFileRef:
					if p.File != nil {
						w.Files = append(w.Files, cmpOr(p.File.Name, p.File.Path))
					}
				}
			}
			w.Text = stripPrefix(strings.Join(text, "\n"))
			if m.Meta != nil {
				w.IDs = m.Meta.MessageIDs
			}
			out = append(out, w)
		case llm.RoleAssistant:
			w := wireMessage{Role: "assistant"}
			var text []string
			var notes []wireMessage
			for _, p := range m.Parts {
				switch p.Kind {
				case llm.PartText:
					text = append(text, p.Text)
				case llm.PartToolCall:
					if p.Call != nil {
						w.Tools = append(w.Tools, p.Call.Name)
					}
					if a, ok := sentHere(id, p.Call, failed); ok {
						notes = append(notes, h.note(id, a))
					}
				}
			}
			if t := strings.Join(text, "\n\n"); strings.TrimSpace(t) != "" {
				w.HTML = renderMarkdown(t)
			}
			if w.HTML != "" || len(w.Tools) > 0 {
				out = append(out, w)
			}
			out = append(out, notes...)
		}
	}
	return out
}

// note is what a message-tool call sent, as the page shows it.
func (h *hub) note(id string, a messageToolArgs) wireMessage {
	w := wireMessage{Role: "assistant"}
	if strings.TrimSpace(a.Content) != "" {
		w.HTML = renderMarkdown(a.Content)
	}
	for _, p := range a.Media {
		w.Sent = append(w.Sent, h.files.file(id, p, "", previewable(p), false))
	}
	return w
}

// stripPrefix drops the context line the agent puts before a user's text
// ("[Mon 2026-01-02 15:04 UTC · web · chat x]").
func stripPrefix(s string) string {
	first, rest, _ := strings.Cut(s, "\n")
	if strings.HasPrefix(first, "[") && strings.HasSuffix(first, "]") && strings.Contains(first, " · chat ") {
		return rest
	}
	return s
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
