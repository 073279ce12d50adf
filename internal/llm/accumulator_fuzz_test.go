package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// FuzzAccumulator feeds arbitrary delta sequences to the Accumulator and
// checks the contract against a reference written here from the
// spec: it never panics; it produces a message exactly for a valid stream
// that ended with done; once it refused a delta it refuses every later one;
// and a message it produces is a valid assistant message whose text and
// thinking are the deltas' in order, whose tool calls are the started calls
// in order with their argument fragments joined (parsed, or kept raw with a
// parse error), and whose usage is the sum of the usage deltas.
//
// The input is a little program: each delta is an opcode byte (kind, and
// how seq moves), a choice byte (call id, name, flags) and a length-prefixed
// string (text, arguments or signature), so the fuzzer can reach deep,
// valid streams as well as every kind of violation.
func FuzzAccumulator(f *testing.F) {
	for _, seed := range accumulatorSeeds() {
		f.Add(encodeDeltas(seed))
	}
	f.Fuzz(func(t *testing.T, program []byte) {
		deltas := decodeDeltas(program)
		want := reference(deltas)
		var acc Accumulator
		refusedAt := -1
		for i, d := range deltas {
			err := acc.Add(d)
			if err != nil && refusedAt < 0 {
				refusedAt = i
			}
			if refusedAt >= 0 && err == nil {
				t.Fatalf("delta %d accepted after delta %d was refused", i, refusedAt)
			}
		}
		if want.violation >= 0 {
			var ce *ContractError
			if refusedAt != want.violation {
				t.Fatalf("refused at delta %d, want %d (%s); deltas %s", refusedAt, want.violation, want.reason, show(deltas))
			}
			if err := acc.Add(Delta{Seq: 1 << 30, Kind: DeltaText}); !errors.As(err, &ce) && want.streamErr == nil {
				t.Fatalf("after a violation Add = %v, want the ContractError again", err)
			}
		} else if refusedAt >= 0 && want.streamErr == nil {
			t.Fatalf("valid stream refused at delta %d: %s", refusedAt, show(deltas))
		}
		msg, err := acc.Message()
		if !want.ok {
			if err == nil {
				t.Fatalf("a message was produced for an invalid or failed stream (%s): %s", want.reason, show(deltas))
			}
			return
		}
		if err != nil {
			t.Fatalf("valid stream gave no message: %v; deltas %s", err, show(deltas))
		}
		checkMessage(t, msg, want, deltas)
	})
}

// expected is what the reference says about a delta sequence.
type expected struct {
	ok        bool // a message must be produced
	violation int  // index of the first contract violation, or -1
	reason    string
	streamErr error // the error terminal's error, if the stream failed
	text      string
	thinking  string
	calls     []expectedCall
	usage     Usage
	stop      StopReason
	meta      *Meta
}

type expectedCall struct {
	id, name, args string
}

// reference applies the delta contract as the spec states it.
func reference(ds []Delta) expected {
	e := expected{violation: -1}
	started, ended := false, false
	lastSeq := 0
	open, seen := map[string]int{}, map[string]bool{}
	fail := func(i int, why string) expected {
		e.ok, e.violation, e.reason = false, i, why
		return e
	}
	for i, d := range ds {
		switch {
		case ended:
			return fail(i, "delta after terminal")
		case !started && d.Kind != DeltaStart:
			return fail(i, "first delta not start")
		case started && d.Kind == DeltaStart:
			return fail(i, "second start")
		case started && d.Seq <= lastSeq:
			return fail(i, "seq not increasing")
		}
		lastSeq = d.Seq
		switch d.Kind {
		case DeltaStart:
			started = true
			e.meta = d.Meta
		case DeltaText:
			if d.Signature != "" || d.Redacted {
				return fail(i, "text with thinking's fields")
			}
			e.text += d.Text
		case DeltaThinking:
			e.thinking += d.Text
		case DeltaToolCallStart:
			if d.Name == "" {
				return fail(i, "call without a name")
			}
			// A missing or used id is replaced by a fresh one (want ""):
			// the message's ids are unique. A start reusing an open
			// call's id ends that call.
			id := d.CallID
			if id == "" || seen[id] {
				id = ""
			}
			seen[d.CallID] = true
			open[d.CallID] = len(e.calls)
			e.calls = append(e.calls, expectedCall{id: id, name: d.Name})
		case DeltaToolCallArgs:
			at, ok := open[d.CallID]
			if !ok {
				return fail(i, "args for a call not open")
			}
			e.calls[at].args += d.Args
		case DeltaToolCallEnd:
			if _, ok := open[d.CallID]; !ok {
				return fail(i, "end of a call not open")
			}
			delete(open, d.CallID)
		case DeltaUsage:
			e.usage = e.usage.Add(d.Usage)
		case DeltaDone:
			if len(open) > 0 {
				return fail(i, "done with open calls")
			}
			ended, e.ok, e.stop = true, true, d.StopReason
		case DeltaError:
			if d.Err == nil {
				return fail(i, "error terminal without error")
			}
			ended, e.streamErr, e.reason = true, d.Err, "error terminal"
		default:
			return fail(i, "unknown kind")
		}
	}
	if !ended {
		e.ok, e.reason = false, "no terminal"
	}
	return e
}

func checkMessage(t *testing.T, msg Message, want expected, ds []Delta) {
	t.Helper()
	if msg.Role != RoleAssistant {
		t.Fatalf("role %q", msg.Role)
	}
	// An empty answer is a valid stream but not a message to keep: the
	// router refuses it (CheckAnswer) and Validate keeps it out of sessions.
	if err := msg.Validate(); err != nil && len(msg.Parts) > 0 {
		t.Fatalf("invalid message: %v; deltas %s", err, show(ds))
	}
	var text, thinking strings.Builder
	var calls []ToolCall
	for _, p := range msg.Parts {
		switch p.Kind {
		case PartText:
			if p.Redacted || p.Signature != "" {
				t.Fatalf("text part carries thinking's fields: %+v; deltas %s", p, show(ds))
			}
			text.WriteString(p.Text)
		case PartThinking:
			thinking.WriteString(p.Text)
		case PartToolCall:
			calls = append(calls, *p.Call)
		}
	}
	if text.String() != want.text {
		t.Fatalf("text %q, want %q", text.String(), want.text)
	}
	if thinking.String() != want.thinking {
		t.Fatalf("thinking %q, want %q", thinking.String(), want.thinking)
	}
	if len(calls) != len(want.calls) {
		t.Fatalf("%d tool calls, want %d", len(calls), len(want.calls))
	}
	ids := map[string]bool{}
	for i, c := range calls {
		w := want.calls[i]
		if (w.id != "" && c.ID != w.id) || c.ID == "" || ids[c.ID] || c.Name != w.name {
			t.Fatalf("call %d = %s %s, want %s %s (a fresh id when the stream's was missing or used); deltas %s", i, c.ID, c.Name, w.id, w.name, show(ds))
		}
		ids[c.ID] = true
		parsed, perr := ParseArguments(w.args)
		switch {
		case perr == nil && (c.ParseError != "" || !bytes.Equal(c.Arguments, parsed) || !json.Valid(c.Arguments) || c.Arguments[0] != '{'):
			t.Fatalf("call %d arguments %q (error %q), want the object %s", i, c.Arguments, c.ParseError, parsed)
		case perr != nil && (c.ParseError == "" || c.Arguments != nil || c.RawArgs != w.args):
			t.Fatalf("call %d with bad arguments %q: got arguments %q, raw %q, error %q", i, w.args, c.Arguments, c.RawArgs, c.ParseError)
		}
	}
	if msg.Meta == nil || msg.Meta.Usage != want.usage || msg.Meta.StopReason != want.stop {
		t.Fatalf("meta %+v, want usage %+v stop %q", msg.Meta, want.usage, want.stop)
	}
	if want.meta != nil && (msg.Meta.Provider != want.meta.Provider || msg.Meta.Model != want.meta.Model) {
		t.Fatalf("meta %+v does not record the start's %+v", msg.Meta, want.meta)
	}
}

// --- the program encoding ---

var (
	fuzzIDs   = []string{"a", "b", "c", ""}
	fuzzNames = []string{"read_file", "exec", "", "list_dir"}
	errFuzz   = errors.New("stream failed")
)

// decodeDeltas turns a program into at most 64 deltas. Opcode byte: low
// nibble mod 11 is the kind (0 and 10 are not kinds); bits 4-5 move seq (+1,
// +1, +3, or not at all). Choice byte: bits 0-1 call id, 2-3 name, 4
// redacted, 5 signature, 6 meta/err present, 7 usage. Then a length byte
// and that many bytes of string.
func decodeDeltas(p []byte) []Delta {
	var out []Delta
	seq := 0
	next := func() byte {
		if len(p) == 0 {
			return 0
		}
		b := p[0]
		p = p[1:]
		return b
	}
	for len(p) > 0 && len(out) < 64 {
		op, choice := next(), next()
		n := int(next()) % 48
		n = min(n, len(p))
		s := string(p[:n])
		p = p[n:]
		switch (op >> 4) & 3 {
		case 0, 1:
			seq++
		case 2:
			seq += 3
		}
		d := Delta{Seq: seq, Kind: DeltaKind(op & 0x0f % 11)}
		d.CallID, d.Name = fuzzIDs[choice&3], fuzzNames[(choice>>2)&3]
		d.Redacted = choice&0x10 != 0
		if choice&0x20 != 0 {
			d.Signature = "sig-" + s
		}
		switch d.Kind {
		case DeltaStart:
			if choice&0x40 != 0 {
				d.Meta = &Meta{Provider: "p", API: "openai", Model: s}
			}
		case DeltaText, DeltaThinking:
			d.Text = s
		case DeltaToolCallArgs:
			d.Args = s
		case DeltaUsage:
			d.Usage = Usage{InputTokens: n, OutputTokens: int(choice), CacheReadTokens: int(op)}
		case DeltaDone:
			d.StopReason = StopReason(s)
		case DeltaError:
			if choice&0x40 != 0 {
				d.Err = errFuzz
			}
		}
		out = append(out, d)
	}
	return out
}

// encodeDeltas writes deltas (seq counting up by one) as a program.
func encodeDeltas(ds []Delta) []byte {
	var b []byte
	index := func(list []string, s string) byte {
		for i, x := range list {
			if x == s {
				return byte(i)
			}
		}
		return 0
	}
	for _, d := range ds {
		choice := index(fuzzIDs, d.CallID) | index(fuzzNames, d.Name)<<2
		if d.Redacted {
			choice |= 0x10
		}
		s := d.Text + d.Args + string(d.StopReason)
		if d.Signature != "" {
			choice |= 0x20
			s = strings.TrimPrefix(d.Signature, "sig-")
		}
		if d.Meta != nil {
			choice |= 0x40
			s = d.Meta.Model
		}
		if d.Err != nil {
			choice |= 0x40
		}
		b = append(b, byte(d.Kind), choice, byte(len(s)))
		b = append(b, s...)
	}
	return b
}

func accumulatorSeeds() [][]Delta {
	start := Delta{Kind: DeltaStart, Meta: &Meta{Model: "m"}}
	return [][]Delta{
		{start, {Kind: DeltaText, Text: "Hel"}, {Kind: DeltaText, Text: "lo"}, {Kind: DeltaDone, StopReason: "stop"}},
		{start, {Kind: DeltaThinking, Text: "hmm"}, {Kind: DeltaThinking, Signature: "sig-x"}, {Kind: DeltaThinking, Redacted: true, Text: "opaque"},
			{Kind: DeltaText, Text: "ok"}, {Kind: DeltaDone}},
		{start, {Kind: DeltaToolCallStart, CallID: "a", Name: "read_file"}, {Kind: DeltaToolCallStart, CallID: "b", Name: "exec"},
			{Kind: DeltaToolCallArgs, CallID: "a", Args: `{"pa`}, {Kind: DeltaToolCallArgs, CallID: "b", Args: `{"command":`},
			{Kind: DeltaToolCallArgs, CallID: "a", Args: `th":"x"}`}, {Kind: DeltaToolCallArgs, CallID: "b", Args: `"ls"}`},
			{Kind: DeltaToolCallEnd, CallID: "b"}, {Kind: DeltaToolCallEnd, CallID: "a"}, {Kind: DeltaUsage}, {Kind: DeltaDone, StopReason: "tool_calls"}},
		{start, {Kind: DeltaToolCallStart, CallID: "a", Name: "exec"}, {Kind: DeltaToolCallArgs, CallID: "a", Args: `{"command": ls`},
			{Kind: DeltaToolCallEnd, CallID: "a"}, {Kind: DeltaDone}},
		{start, {Kind: DeltaText, Text: "partial"}, {Kind: DeltaError, Err: errFuzz}},
		{start, {Kind: DeltaText, Text: "no terminal"}},
		{start, {Kind: DeltaToolCallStart, CallID: "a", Name: "exec"}, {Kind: DeltaDone}},
		{{Kind: DeltaText, Text: "before start"}},
	}
}

func show(ds []Delta) string {
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, "\n  #%d %s id=%q name=%q text=%q args=%q sig=%q red=%v err=%v", d.Seq, d.Kind, d.CallID, d.Name, d.Text, d.Args, d.Signature, d.Redacted, d.Err)
	}
	return b.String()
}
