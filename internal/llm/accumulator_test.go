package llm

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
)

// seq numbers the deltas 1..n so cases only list what matters.
func seq(ds ...Delta) []Delta {
	for i := range ds {
		if ds[i].Seq == 0 {
			ds[i].Seq = i + 1
		}
	}
	return ds
}

var start = Delta{Kind: DeltaStart, Meta: &Meta{Provider: "openai", API: "openai", Model: "m"}}

func TestAccumulator(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name     string
		deltas   []Delta
		want     []Part
		usage    Usage
		stop     StopReason
		wantErr  error // errors.Is target
		contract bool  // want a *ContractError from Add
	}{
		{
			name:   "text concatenated in order",
			deltas: seq(start, Delta{Kind: DeltaText, Text: "Hel"}, Delta{Kind: DeltaText, Text: "lo"}, Delta{Kind: DeltaDone, StopReason: "stop"}),
			want:   []Part{Text("Hello")},
			stop:   "stop",
		},
		{
			name: "thinking then text keeps order and signature",
			deltas: seq(start,
				Delta{Kind: DeltaThinking, Text: "let me "}, Delta{Kind: DeltaThinking, Text: "think"},
				Delta{Kind: DeltaThinking, Signature: "sig1"},
				Delta{Kind: DeltaThinking, Text: "again"}, Delta{Kind: DeltaThinking, Signature: "sig2"},
				Delta{Kind: DeltaThinking, Redacted: true, Text: "opaque"},
				Delta{Kind: DeltaText, Text: "answer"}, Delta{Kind: DeltaDone}),
			want: []Part{
				{Kind: PartThinking, Text: "let me think", Signature: "sig1"},
				{Kind: PartThinking, Text: "again", Signature: "sig2"},
				{Kind: PartThinking, Text: "opaque", Redacted: true},
				Text("answer"),
			},
		},
		{
			name: "interleaved tool-call fragments joined per id",
			deltas: seq(start,
				Delta{Kind: DeltaText, Text: "checking"},
				Delta{Kind: DeltaToolCallStart, CallID: "a", Name: "read_file"},
				Delta{Kind: DeltaToolCallStart, CallID: "b", Name: "list_dir"},
				Delta{Kind: DeltaToolCallArgs, CallID: "a", Args: `{"pa`},
				Delta{Kind: DeltaToolCallArgs, CallID: "b", Args: `{"path":`},
				Delta{Kind: DeltaToolCallArgs, CallID: "a", Args: `th": "x.md"}`},
				Delta{Kind: DeltaToolCallArgs, CallID: "b", Args: `"."}`},
				Delta{Kind: DeltaToolCallEnd, CallID: "b"},
				Delta{Kind: DeltaToolCallEnd, CallID: "a"},
				Delta{Kind: DeltaDone, StopReason: "tool_calls"}),
			want: []Part{
				Text("checking"),
				{Kind: PartToolCall, Call: &ToolCall{ID: "a", Name: "read_file", Arguments: json.RawMessage(`{"path":"x.md"}`)}},
				{Kind: PartToolCall, Call: &ToolCall{ID: "b", Name: "list_dir", Arguments: json.RawMessage(`{"path":"."}`)}},
			},
			stop: "tool_calls",
		},
		{
			name: "a signature on a tool call stays on its part",
			deltas: seq(start,
				Delta{Kind: DeltaToolCallStart, CallID: "a", Name: "list_dir", Signature: "gsig"},
				Delta{Kind: DeltaToolCallArgs, CallID: "a", Args: `{"path":"."}`},
				Delta{Kind: DeltaToolCallEnd, CallID: "a"},
				Delta{Kind: DeltaToolCallStart, CallID: "b", Name: "list_dir"},
				Delta{Kind: DeltaToolCallEnd, CallID: "b"},
				Delta{Kind: DeltaDone}),
			want: []Part{
				{Kind: PartToolCall, Signature: "gsig", Call: &ToolCall{ID: "a", Name: "list_dir", Arguments: json.RawMessage(`{"path":"."}`)}},
				{Kind: PartToolCall, Call: &ToolCall{ID: "b", Name: "list_dir", Arguments: json.RawMessage(`{}`)}},
			},
		},
		{
			name: "empty arguments become an empty object",
			deltas: seq(start, Delta{Kind: DeltaToolCallStart, CallID: "a", Name: "list_dir"},
				Delta{Kind: DeltaToolCallEnd, CallID: "a"}, Delta{Kind: DeltaDone}),
			want: []Part{{Kind: PartToolCall, Call: &ToolCall{ID: "a", Name: "list_dir", Arguments: json.RawMessage(`{}`)}}},
		},
		{
			name: "arguments that fail to parse keep the raw text",
			deltas: seq(start, Delta{Kind: DeltaToolCallStart, CallID: "a", Name: "exec"},
				Delta{Kind: DeltaToolCallArgs, CallID: "a", Args: `{"command": "ls`},
				Delta{Kind: DeltaToolCallEnd, CallID: "a"}, Delta{Kind: DeltaDone}),
			want: []Part{{Kind: PartToolCall, Call: &ToolCall{ID: "a", Name: "exec", RawArgs: `{"command": "ls`,
				ParseError: "arguments are not valid JSON: unexpected end of JSON input"}}},
		},
		{
			name: "arguments that are not an object",
			deltas: seq(start, Delta{Kind: DeltaToolCallStart, CallID: "a", Name: "exec"},
				Delta{Kind: DeltaToolCallArgs, CallID: "a", Args: `["ls"]`},
				Delta{Kind: DeltaToolCallEnd, CallID: "a"}, Delta{Kind: DeltaDone}),
			want: []Part{{Kind: PartToolCall, Call: &ToolCall{ID: "a", Name: "exec", RawArgs: `["ls"]`,
				ParseError: `arguments must be a JSON object, got "[\"ls\"]"`}}},
		},
		{
			name:   "usage summed",
			deltas: seq(start, Delta{Kind: DeltaUsage, Usage: Usage{InputTokens: 10}}, Delta{Kind: DeltaText, Text: "x"}, Delta{Kind: DeltaUsage, Usage: Usage{OutputTokens: 3, InputTokens: 1}}, Delta{Kind: DeltaDone}),
			want:   []Part{Text("x")},
			usage:  Usage{InputTokens: 11, OutputTokens: 3},
		},
		{
			name:    "error terminal yields no message",
			deltas:  seq(start, Delta{Kind: DeltaText, Text: "partial"}, Delta{Kind: DeltaError, Err: boom}),
			wantErr: boom,
		},
		{
			name:    "stream without terminal",
			deltas:  seq(start, Delta{Kind: DeltaText, Text: "partial"}),
			wantErr: ErrIncomplete,
		},
		{name: "empty stream", wantErr: ErrIncomplete},
		{name: "first delta not start", deltas: seq(Delta{Kind: DeltaText, Text: "x"}), contract: true},
		{name: "second start", deltas: seq(start, start), contract: true},
		{name: "seq not increasing", deltas: []Delta{{Seq: 1, Kind: DeltaStart}, {Seq: 3, Kind: DeltaText, Text: "a"}, {Seq: 3, Kind: DeltaText, Text: "b"}}, contract: true},
		{name: "delta after done", deltas: seq(start, Delta{Kind: DeltaDone}, Delta{Kind: DeltaText, Text: "late"}), contract: true},
		{name: "two terminals", deltas: seq(start, Delta{Kind: DeltaDone}, Delta{Kind: DeltaError, Err: boom}), contract: true},
		{name: "args for unknown call", deltas: seq(start, Delta{Kind: DeltaToolCallArgs, CallID: "zz", Args: "{}"}), contract: true},
		{name: "end of unknown call", deltas: seq(start, Delta{Kind: DeltaToolCallEnd, CallID: "zz"}), contract: true},
		{name: "args after end", deltas: seq(start, Delta{Kind: DeltaToolCallStart, CallID: "a", Name: "x"}, Delta{Kind: DeltaToolCallEnd, CallID: "a"}, Delta{Kind: DeltaToolCallArgs, CallID: "a", Args: "{}"}), contract: true},
		{name: "call without name", deltas: seq(start, Delta{Kind: DeltaToolCallStart, CallID: "a"}), contract: true},
		{name: "done with open call", deltas: seq(start, Delta{Kind: DeltaToolCallStart, CallID: "a", Name: "x"}, Delta{Kind: DeltaDone}), contract: true},
		{name: "error terminal without error", deltas: seq(start, Delta{Kind: DeltaError}), contract: true},
		{name: "unknown kind", deltas: seq(start, Delta{Kind: 99}), contract: true},
		{name: "text with a signature", deltas: seq(start, Delta{Kind: DeltaText, Text: "x", Signature: "s"}), contract: true},
		{name: "redacted text", deltas: seq(start, Delta{Kind: DeltaText, Text: "x", Redacted: true}), contract: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var acc Accumulator
			var addErr error
			for _, d := range tt.deltas {
				if err := acc.Add(d); err != nil {
					addErr = err
					break
				}
			}
			var ce *ContractError
			if tt.contract {
				if !errors.As(addErr, &ce) {
					t.Fatalf("Add error = %v, want a contract violation", addErr)
				}
				if _, err := acc.Message(); !errors.As(err, &ce) {
					t.Fatalf("Message error = %v, want the contract violation", err)
				}
				return
			}
			if addErr != nil {
				t.Fatalf("Add: %v", addErr)
			}
			msg, err := acc.Message()
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Message error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Message: %v", err)
			}
			if msg.Role != RoleAssistant {
				t.Errorf("role = %s", msg.Role)
			}
			if !reflect.DeepEqual(msg.Parts, tt.want) {
				gotJSON, _ := json.Marshal(msg.Parts)
				wantJSON, _ := json.Marshal(tt.want)
				t.Errorf("parts\n got %s\nwant %s", gotJSON, wantJSON)
			}
			if msg.Meta.Usage != tt.usage {
				t.Errorf("usage = %+v, want %+v", msg.Meta.Usage, tt.usage)
			}
			if msg.Meta.StopReason != tt.stop {
				t.Errorf("stop = %q, want %q", msg.Meta.StopReason, tt.stop)
			}
			if msg.Meta.Provider != "openai" || msg.Meta.Model != "m" {
				t.Errorf("meta lost: %+v", msg.Meta)
			}
			if err := msg.Validate(); err != nil {
				t.Errorf("assembled message invalid: %v", err)
			}
		})
	}
}

func TestAccumulatorRefusesAfterViolation(t *testing.T) {
	var acc Accumulator
	if err := acc.Add(Delta{Seq: 1, Kind: DeltaText}); err == nil {
		t.Fatal("want violation")
	}
	if err := acc.Add(Delta{Seq: 2, Kind: DeltaStart}); err == nil {
		t.Fatal("accumulator accepted input after a violation")
	}
}

func TestMessageValidate(t *testing.T) {
	tests := []struct {
		name string
		msg  Message
		ok   bool
	}{
		{"system text", NewText(RoleSystem, "x"), true},
		{"user image", Message{Role: RoleUser, Parts: []Part{{Kind: PartImage, Image: &Image{MIME: "image/png", Data: []byte{1}}}}}, true},
		{"user tool call", Message{Role: RoleUser, Parts: []Part{{Kind: PartToolCall, Call: &ToolCall{ID: "a", Name: "b"}}}}, false},
		{"assistant thinking", Message{Role: RoleAssistant, Parts: []Part{{Kind: PartThinking, Text: "t"}}}, true},
		{"assistant image", Message{Role: RoleAssistant, Parts: []Part{{Kind: PartImage, Image: &Image{URL: "u"}}}}, false},
		{"tool result", Message{Role: RoleTool, Parts: []Part{{Kind: PartToolResult, Result: &ToolResult{ToolCallID: "a"}}}}, true},
		{"tool text", NewText(RoleTool, "x"), false},
		{"empty tool", Message{Role: RoleTool}, false},
		{"result without id", Message{Role: RoleTool, Parts: []Part{{Kind: PartToolResult, Result: &ToolResult{}}}}, false},
		{"image without payload", Message{Role: RoleUser, Parts: []Part{{Kind: PartImage, Image: &Image{MIME: "image/png"}}}}, false},
		{"file without path", Message{Role: RoleUser, Parts: []Part{{Kind: PartFileRef, File: &FileRef{}}}}, false},
		{"unknown role", Message{Role: "robot"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.msg.Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestContentLevels(t *testing.T) {
	c := Content{Live: "full", Summary: "short", Gist: "g"}
	for l, want := range map[Level]string{Live: "full", Summary: "short", Gist: "g"} {
		if got := c.At(l); got != want {
			t.Errorf("At(%s) = %q, want %q", l, got, want)
		}
	}
	onlyLive := Content{Live: "x", Summary: "x", Gist: "x"}.Compact()
	if onlyLive != (Content{Live: "x"}) {
		t.Errorf("Compact kept duplicates: %+v", onlyLive)
	}
	if got := onlyLive.At(Gist); got != "x" {
		t.Errorf("gist falls back to live: got %q", got)
	}
	b, _ := json.Marshal(onlyLive)
	if string(b) != `{"live":"x"}` {
		t.Errorf("duplicate renderings stored: %s", b)
	}
}

func BenchmarkAccumulator(b *testing.B) {
	deltas := []Delta{start}
	for i := 0; i < 200; i++ {
		deltas = append(deltas, Delta{Kind: DeltaText, Text: "token "})
	}
	deltas = append(deltas, Delta{Kind: DeltaToolCallStart, CallID: "c1", Name: "read_file"})
	deltas = append(deltas, Delta{Kind: DeltaToolCallArgs, CallID: "c1", Args: `{"path":"`})
	for i := 0; i < 20; i++ {
		deltas = append(deltas, Delta{Kind: DeltaToolCallArgs, CallID: "c1", Args: "notes/"})
	}
	deltas = append(deltas, Delta{Kind: DeltaToolCallArgs, CallID: "c1", Args: `x.md"}`}, Delta{Kind: DeltaToolCallEnd, CallID: "c1"}, Delta{Kind: DeltaDone})
	deltas = seq(deltas...)
	b.ReportAllocs()
	for b.Loop() {
		var acc Accumulator
		for _, d := range deltas {
			_ = acc.Add(d)
		}
		_, _ = acc.Message()
	}
}

// TestCallIDsAreUniqueWhateverTheServerSends: a missing id, an id used
// before in the stream, and an id reused while its call is open each give
// the message one call per start with its own id and its own arguments.
func TestCallIDsAreUniqueWhateverTheServerSends(t *testing.T) {
	call := func(id, args string) []Delta {
		return []Delta{{Kind: DeltaToolCallStart, CallID: id, Name: "f"}, {Kind: DeltaToolCallArgs, CallID: id, Args: args}, {Kind: DeltaToolCallEnd, CallID: id}}
	}
	cat := func(parts ...[]Delta) []Delta {
		out := []Delta{start}
		for _, p := range parts {
			out = append(out, p...)
		}
		return seq(append(out, Delta{Kind: DeltaDone})...)
	}
	tests := []struct {
		name   string
		deltas []Delta
		kept   []string // ids kept as sent; "" where a fresh one is made
	}{
		{"distinct ids are kept", cat(call("a", `{"n":1}`), call("b", `{"n":2}`)), []string{"a", "b"}},
		{"a repeated id", cat(call("0", `{"n":1}`), call("0", `{"n":2}`), call("0", `{"n":3}`)), []string{"0", "", ""}},
		{"no id", cat(call("", `{"n":1}`), call("", `{"n":2}`)), []string{"", ""}},
		{"an id reused while its call is open", seq(start,
			Delta{Kind: DeltaToolCallStart, CallID: "x", Name: "f"}, Delta{Kind: DeltaToolCallArgs, CallID: "x", Args: `{"n":1}`},
			Delta{Kind: DeltaToolCallStart, CallID: "x", Name: "f"}, Delta{Kind: DeltaToolCallArgs, CallID: "x", Args: `{"n":2}`},
			Delta{Kind: DeltaToolCallEnd, CallID: "x"}, Delta{Kind: DeltaDone}), []string{"x", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var acc Accumulator
			for _, d := range tt.deltas {
				if err := acc.Add(d); err != nil {
					t.Fatal(err)
				}
			}
			msg, err := acc.Message()
			if err != nil {
				t.Fatal(err)
			}
			if err := msg.Validate(); err != nil {
				t.Fatal(err)
			}
			calls := msg.ToolCalls()
			if len(calls) != len(tt.kept) {
				t.Fatalf("%d calls, want %d", len(calls), len(tt.kept))
			}
			seen := map[string]bool{}
			for i, c := range calls {
				if (tt.kept[i] != "" && c.ID != tt.kept[i]) || c.ID == "" || seen[c.ID] {
					t.Errorf("call %d id %q (ids so far %v), want %q or a fresh one", i, c.ID, seen, tt.kept[i])
				}
				seen[c.ID] = true
				if want := fmt.Sprintf(`{"n":%d}`, i+1); string(c.Arguments) != want {
					t.Errorf("call %d arguments %s, want %s", i, c.Arguments, want)
				}
			}
		})
	}
}
