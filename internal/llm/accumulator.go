package llm

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// Accumulator turns one provider stream into one assistant Message and
// enforces the delta contract: start first, seq strictly increasing,
// exactly one terminal, argument fragments joined per call id even when calls
// interleave. Violations are returned as *ContractError; it never panics.
// The zero value is ready to use.
//
// It is also the one place that makes the message's tool call ids unique,
// whatever the server sent, so that every call gets exactly one result:
// a call started with no id, or with an id the stream already used (some
// servers number calls from 0 each time, or send one id for every call),
// gets a fresh one (see freshCallID); the stream's later args and end
// deltas with that id go to the newest call started with it. A start that
// reuses the id of a call still open ends that call first: the server has
// moved on to a new one. Adapters that can tell such calls apart better
// (by an index on each call) keep them apart themselves.
type Accumulator struct {
	started bool
	ended   bool
	lastSeq int
	msg     Message
	usage   Usage
	stop    StopReason
	err     error
	// open maps the id the stream gives a call still open to its part
	// index and argument buffer.
	open map[string]*openCall
	// ids holds the ids of the message's calls, as given or made.
	ids map[string]bool
	// text collects the last part's text while it grows, so a long stream is
	// not copied once per token; it is flushed into the part when it closes.
	text    strings.Builder
	growing int // index of the part text belongs to, or -1
}

type openCall struct {
	part int
	args strings.Builder
}

// Usage is the usage the stream reported so far: the answer's, or what a
// failed call was billed for before it broke.
func (a *Accumulator) Usage() Usage { return a.usage }

// Add feeds one delta. After an error the accumulator refuses further input.
func (a *Accumulator) Add(d Delta) error {
	if a.err != nil {
		return a.err
	}
	if err := a.add(d); err != nil {
		a.err = err
		return err
	}
	return nil
}

func (a *Accumulator) violation(d Delta, format string, args ...any) error {
	return &ContractError{Seq: d.Seq, Kind: d.Kind, Reason: fmt.Sprintf(format, args...)}
}

func (a *Accumulator) add(d Delta) error {
	switch {
	case a.ended:
		return a.violation(d, "delta after terminal")
	case !a.started && d.Kind != DeltaStart:
		return a.violation(d, "first delta must be start")
	case a.started && d.Kind == DeltaStart:
		return a.violation(d, "second start")
	case a.started && d.Seq <= a.lastSeq:
		return a.violation(d, "seq %d not after %d", d.Seq, a.lastSeq)
	}
	a.lastSeq = d.Seq
	switch d.Kind {
	case DeltaStart:
		a.started = true
		a.growing = -1
		a.msg = Message{Role: RoleAssistant}
		if d.Meta != nil {
			m := *d.Meta
			a.msg.Meta = &m
		}
	case DeltaText:
		if d.Signature != "" || d.Redacted {
			// A signature or an encrypted payload belongs to thinking; on a
			// text part it would be lost or replayed as plain text.
			return a.violation(d, "text delta with a signature or redacted payload")
		}
		a.appendText(PartText, d)
	case DeltaThinking:
		a.appendText(PartThinking, d)
	case DeltaToolCallStart:
		return a.startCall(d)
	case DeltaToolCallArgs:
		c, ok := a.open[d.CallID]
		if !ok {
			return a.violation(d, "arguments for unknown or closed call %q", d.CallID)
		}
		c.args.WriteString(d.Args)
	case DeltaToolCallEnd:
		return a.endCall(d)
	case DeltaUsage:
		a.usage = a.usage.Add(d.Usage)
	case DeltaDone:
		if len(a.open) > 0 {
			return a.violation(d, "done with %d tool call(s) still open", len(a.open))
		}
		a.ended = true
		a.stop = d.StopReason
		a.flush()
	case DeltaError:
		a.ended = true
		if d.Err == nil {
			return a.violation(d, "error terminal without an error")
		}
		a.err = d.Err
		return nil
	default:
		return a.violation(d, "unknown kind")
	}
	return nil
}

// appendText concatenates onto the last part when it is of the same kind;
// a signed thinking part is closed, so the next thinking starts a new block.
func (a *Accumulator) appendText(kind PartKind, d Delta) {
	parts := a.msg.Parts
	if n := len(parts); n > 0 && a.growing == n-1 && parts[n-1].Kind == kind && !d.Redacted {
		a.text.WriteString(d.Text)
		if d.Signature != "" {
			parts[n-1].Signature = d.Signature
			a.flush()
		}
		return
	}
	if d.Text == "" && d.Signature == "" {
		return
	}
	a.flush()
	a.msg.Parts = append(parts, Part{Kind: kind, Signature: d.Signature, Redacted: d.Redacted})
	if d.Redacted || d.Signature != "" {
		a.msg.Parts[len(a.msg.Parts)-1].Text = d.Text
		return
	}
	a.growing = len(a.msg.Parts) - 1
	a.text.WriteString(d.Text)
}

// flush moves the growing text into its part.
func (a *Accumulator) flush() {
	if a.growing >= 0 {
		a.msg.Parts[a.growing].Text = a.text.String()
		a.text.Reset()
		a.growing = -1
	}
}

func (a *Accumulator) startCall(d Delta) error {
	if d.Name == "" {
		return a.violation(d, "tool call needs a name")
	}
	if a.open == nil {
		a.open = make(map[string]*openCall)
		a.ids = make(map[string]bool)
	}
	if c, ok := a.open[d.CallID]; ok {
		a.closeCall(d.CallID, c)
	}
	id := d.CallID
	for id == "" || a.ids[id] {
		id = freshCallID()
	}
	a.ids[id] = true
	a.flush()
	a.open[d.CallID] = &openCall{part: len(a.msg.Parts)}
	// A signature on a call (a provider's signature over its reasoning) is kept on its
	// part, to be replayed with the call to the provider that made it.
	a.msg.Parts = append(a.msg.Parts, Part{Kind: PartToolCall, Signature: d.Signature, Call: &ToolCall{ID: id, Name: d.Name}})
	return nil
}

// freshCallID makes an id for a call whose own was missing or taken. It is
// random rather than a counter: sessions outlive the process, and a history
// replayed to a provider must not hold one id twice.
func freshCallID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return "call_" + hex.EncodeToString(b[:])
}

func (a *Accumulator) endCall(d Delta) error {
	c, ok := a.open[d.CallID]
	if !ok {
		return a.violation(d, "end of unknown or closed call %q", d.CallID)
	}
	a.closeCall(d.CallID, c)
	return nil
}

// closeCall ends the open call the stream calls streamID: its arguments
// are parsed, or kept raw with the parse error.
func (a *Accumulator) closeCall(streamID string, c *openCall) {
	delete(a.open, streamID)
	call := a.msg.Parts[c.part].Call
	args, perr := ParseArguments(c.args.String())
	if perr != nil {
		call.RawArgs = c.args.String()
		call.ParseError = perr.Error()
		return
	}
	call.Arguments = args
}

// ParseArguments validates a tool call's argument text: empty means {}, and
// anything else must be one JSON object.
func ParseArguments(raw string) (json.RawMessage, error) {
	trimmed := bytes.TrimSpace([]byte(raw))
	if len(trimmed) == 0 {
		return json.RawMessage("{}"), nil
	}
	if trimmed[0] != '{' {
		return nil, fmt.Errorf("arguments must be a JSON object, got %s", describeJSONStart(trimmed))
	}
	if !json.Valid(trimmed) {
		var v any
		err := json.Unmarshal(trimmed, &v)
		return nil, fmt.Errorf("arguments are not valid JSON: %v", err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, trimmed); err != nil {
		return nil, fmt.Errorf("arguments are not valid JSON: %v", err)
	}
	return json.RawMessage(buf.Bytes()), nil
}

func describeJSONStart(b []byte) string {
	if len(b) > 20 {
		b = b[:20]
	}
	return fmt.Sprintf("%q", b)
}

// Started reports whether the start delta was seen.
func (a *Accumulator) Started() bool { return a.started }

// Ended reports whether a terminal delta was seen.
func (a *Accumulator) Ended() bool { return a.ended }

// Message returns the assembled assistant message. It fails with the stream's
// error for an error terminal, ErrIncomplete without a terminal, or the first
// contract violation; in those cases no message is produced.
func (a *Accumulator) Message() (Message, error) {
	if a.err != nil {
		return Message{}, a.err
	}
	if !a.ended {
		return Message{}, ErrIncomplete
	}
	m := a.msg
	if m.Meta == nil {
		m.Meta = &Meta{}
	}
	m.Meta.Usage = a.usage
	m.Meta.StopReason = a.stop
	return m, nil
}
