package api

import (
	"cmp"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/llm"
)

// call is one request the agent is answering. The manager's goroutine feeds
// it (receive, which never blocks); the request's handler takes what
// arrived (take) and writes it. What the client is shown only ever grows:
// a draft that extends the text shown adds its new end; a draft that does
// not (the model's next call after tools, or a retried call) and a message
// the agent sent with its message tool start a new paragraph. So nothing is
// sent twice and nothing shown is taken back.
//
// A non-streamed answer is not bound by what was shown: it is the turn's
// paragraphs, with a retried model call's text replacing its first attempt
// (only a stream the client already saw carries the first attempt).
type call struct {
	id    string // chat id and message id of the request
	hints bool   // tool hints become reasoning_content

	// release gives back the session and key slots; finish calls it once.
	release func()
	// timer expires the call after turn_timeout: its handler answers 504,
	// while the call itself (and the session it holds) lasts until the
	// turn's answer arrives.
	timer   *time.Timer
	expired chan struct{}
	expire  func()
	// done is closed when the call finished: answered, timed out, or shut down.
	done chan struct{}
	// notify is signalled (without blocking) when something arrived.
	notify chan struct{}

	mu      sync.Mutex
	turnID  string
	started bool
	seg     string // the current model call's text, as shown
	wrote   bool   // some content was shown
	pending []chunk
	content strings.Builder
	// paras are the paragraphs of the non-streamed answer; the last one is
	// the current model call's text (seg) while seg is not empty.
	paras   []string
	reason  strings.Builder
	usage   llm.Usage
	failed  bool   // the turn ended in an error
	failure string // why, for the client, when failed
	finish  llm.StopReason
	end     endReason
}

// chunk is text to send, content or reasoning.
type chunk struct {
	reasoning bool
	text      string
}

type endReason uint8

const (
	endNone     endReason = iota
	endAnswered           // the final message (or a command's reply) arrived
	endShutdown           // the gateway stopped before the answer came
)

func newCall(id string, hints bool) *call {
	c := &call{id: id, hints: hints,
		done: make(chan struct{}), notify: make(chan struct{}, 1), expired: make(chan struct{})}
	c.expire = sync.OnceFunc(func() { close(c.expired) })
	return c
}

// receive takes one outbound message of the call's chat and reports whether
// it ended the call.
func (c *call) receive(m bus.OutboundMessage) (ended bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.end != endNone {
		return false
	}
	if m.TurnID != "" && c.turnID != "" && m.TurnID != c.turnID {
		return false // another turn of this chat id: not this request's
	}
	switch m.Kind {
	case bus.KindStart:
		c.turnID, c.started = m.TurnID, true
	case bus.KindDraft:
		c.show(m.Content)
	case bus.KindStatus:
		c.seg = "" // tools run; the next model call starts a new paragraph
		if c.hints && m.Content != "" {
			c.emit(true, m.Content+"\n")
		}
	case bus.KindMessage:
		if !c.started && m.ReplyTo == c.id {
			// A command's reply: commands answer without a turn.
			c.answer(m)
			return true
		}
		c.seg = ""
		c.show(m.Content)
		c.seg = ""
		c.noteFiles(m.Media)
	case bus.KindFinal:
		c.usage, c.finish = m.Usage, m.Stop
		c.answer(m)
		return true
	}
	c.signal()
	return false
}

// answer ends the call with m's content.
func (c *call) answer(m bus.OutboundMessage) {
	if m.IsError {
		c.failed, c.failure = true, m.Content
	} else {
		c.show(m.Content)
		c.noteFiles(m.Media)
	}
	c.end = endAnswered
	c.signal()
}

// show makes text the current model call's text, emitting what is new.
func (c *call) show(text string) {
	if text == "" {
		return
	}
	if c.seg != "" && strings.HasPrefix(text, c.seg) {
		c.emit(false, text[len(c.seg):])
		c.seg = text
		c.paras[len(c.paras)-1] = text
		return
	}
	if c.seg != "" {
		// The same model call again (retried) or the final replacing its
		// draft: the stream adds a paragraph, the whole answer replaces.
		c.paras[len(c.paras)-1] = text
	} else {
		c.paras = append(c.paras, text)
	}
	if c.wrote {
		c.emit(false, "\n\n")
	}
	c.emit(false, text)
	c.seg = text
}

// noteFiles tells the client, as a paragraph of its own, of the files a
// message carried: the API answers with text only, so it says so rather
// than dropping them silently (the agent was told they were sent).
func (c *call) noteFiles(media []llm.Part) {
	var names []string
	for _, p := range media {
		switch {
		case p.File != nil:
			names = append(names, cmp.Or(p.File.Name, filepath.Base(p.File.Path)))
		case p.Image != nil && p.Image.Path != "":
			names = append(names, filepath.Base(p.Image.Path))
		default:
			names = append(names, "a picture")
		}
	}
	if len(names) == 0 {
		return
	}
	c.seg = ""
	c.show(fmt.Sprintf("📎 %s: the assistant sent %d file(s) here, which this API cannot carry; "+
		"they are in its workspace (the web page or a chat app shows them).", strings.Join(names, ", "), len(names)))
	c.seg = ""
}

func (c *call) emit(reasoning bool, text string) {
	if text == "" {
		return
	}
	if reasoning {
		c.reason.WriteString(text)
	} else {
		c.content.WriteString(text)
		c.wrote = true
	}
	if n := len(c.pending); n > 0 && c.pending[n-1].reasoning == reasoning {
		c.pending[n-1].text += text
		return
	}
	c.pending = append(c.pending, chunk{reasoning: reasoning, text: text})
}

func (c *call) signal() {
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// stop ends a call that got no answer (shutdown); it reports
// whether it was still open.
func (c *call) stop(why endReason) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.end != endNone {
		return false
	}
	c.end = why
	c.signal()
	return true
}

// take returns the chunks that arrived since the last take and how the call
// ended (endNone while it goes on).
func (c *call) take() ([]chunk, endReason) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pending
	c.pending = nil
	return p, c.end
}

// result is the whole answer, once the call ended.
type result struct {
	// streamed is what a stream showed; content is the non-streamed answer.
	streamed, content, reasoning string
	usage                        llm.Usage
	failed                       bool
	failure                      string
	// finish is why the model stopped
	// (docs/reliability.md#every-turn-ends-with-something-to-read), for
	// finish_reason.
	finish llm.StopReason
	end    endReason
}

func (c *call) result() result {
	c.mu.Lock()
	defer c.mu.Unlock()
	return result{streamed: c.content.String(), content: strings.Join(c.paras, "\n\n"), reasoning: c.reason.String(), usage: c.usage,
		failed: c.failed, failure: c.failure, finish: c.finish, end: c.end}
}
