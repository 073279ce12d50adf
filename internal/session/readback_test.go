package session

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// decodedBack is the reference readBack must equal: the message as the
// store's encoder writes it and decodeMessage reads it.
func decodedBack(t *testing.T, m llm.Message) llm.Message {
	t.Helper()
	enc := newEncoder()
	if err := enc.enc.Encode(m); err != nil {
		t.Fatalf("encode: %v", err)
	}
	back, err := decodeMessage(enc.buf.Bytes())
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return back
}

func TestReadBackMatchesDecoding(t *testing.T) {
	stamp := time.Date(2026, 11, 26, 21, 4, 5, 123456789, time.UTC)
	berlin := time.FixedZone("CET", 3600)
	meta := &llm.Meta{Route: "default", Provider: "openai", API: "openai", Model: "gpt-x", StopReason: "stop",
		Usage: llm.Usage{InputTokens: 7000, OutputTokens: 12}, MessageIDs: []string{"41", "42"}}
	call := llm.Part{Kind: llm.PartToolCall, Call: &llm.ToolCall{ID: "c1", Name: "read_file", Arguments: json.RawMessage(`{ "path" : "a" }`)}}
	tests := []struct {
		name string
		m    llm.Message
		fast bool // readBack must answer without the decoder
	}{
		{"user text, stamped", llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.Text("hello <b>&</b>\u2028\n\"q\"")}, Time: stamp}, true},
		{"answer with meta", llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{
			{Kind: llm.PartThinking, Text: "hmm", Signature: "sig"}, {Kind: llm.PartThinking, Text: "x", Redacted: true}, llm.Text("hi")},
			Time: stamp, Meta: meta}, true},
		{"summary and gist", llm.Message{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: "long", Summary: "s", Gist: "g"}}, Time: stamp}, true},
		{"no time", llm.NewText(llm.RoleUser, "x"), true},
		{"empty meta ids", llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.Text("x")}, Time: stamp, Meta: &llm.Meta{MessageIDs: []string{}}}, true},
		{"empty meta", llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text("x")}, Time: stamp, Meta: &llm.Meta{}}, true},
		// A user message: an assistant message without parts is invalid
		// (docs/reliability.md#every-turn-ends-with-something-to-read).
		{"no parts", llm.Message{Role: llm.RoleUser, Time: stamp}, true},
		{"empty parts", llm.Message{Role: llm.RoleUser, Parts: []llm.Part{}, Time: stamp}, true},
		{"another zone", llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.Text("x")}, Time: stamp.In(berlin)}, true},
		{"local time with a monotonic reading", llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.Text("x")}, Time: time.Now()}, true},
		{"invalid UTF-8 in text", llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.Text("a\xffb")}, Time: stamp}, false},
		{"invalid UTF-8 in a message id", llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.Text("x")}, Time: stamp, Meta: &llm.Meta{MessageIDs: []string{"\xc3"}}}, false},
		{"invalid UTF-8 in the model", llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text("x")}, Time: stamp, Meta: &llm.Meta{Model: "m\xfe"}}, false},
		{"tool call", llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{call}, Time: stamp}, false},
		{"tool result", llm.Message{Role: llm.RoleTool, Parts: []llm.Part{{Kind: llm.PartToolResult,
			Result: &llm.ToolResult{ToolCallID: "c1", Name: "read_file", Content: llm.PlainContent("ok")}}}, Time: stamp}, false},
		{"image", llm.Message{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartImage, Image: &llm.Image{MIME: "image/png", URL: "u"}}}, Time: stamp}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := decodedBack(t, tt.m)
			got, ok := readBack(tt.m)
			if ok != tt.fast {
				t.Fatalf("readBack ok = %v, want %v", ok, tt.fast)
			}
			if !ok {
				return
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("readBack differs from the decoder\n got: %#v\nwant: %#v", got, want)
			}
			if len(got.Parts) > 0 && &got.Parts[0] == &tt.m.Parts[0] {
				t.Fatal("readBack shares the parts with its argument")
			}
			if got.Meta != nil && got.Meta == tt.m.Meta {
				t.Fatal("readBack shares the meta with its argument")
			}
			for i, p := range got.Parts {
				if p.Text != "" && unsafe.StringData(p.Text) == unsafe.StringData(tt.m.Parts[i].Text) {
					t.Fatalf("part %d: readBack shares the text with its argument", i)
				}
			}
			if got.Meta != nil && got.Meta.Model != "" && unsafe.StringData(got.Meta.Model) == unsafe.StringData(tt.m.Meta.Model) {
				t.Fatal("readBack shares the model's name with its argument")
			}
		})
	}
}

// TestReadBackRandom compares readBack with the decoder on random messages
// of the kinds it answers for, strings drawn from bytes that need escaping,
// invalid UTF-8 among them.
func TestReadBackRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 2026))
	fast := 0
	for i := range 3000 {
		m := randomPlain(rng)
		want := decodedBack(t, m)
		got, ok := readBack(m)
		if !ok {
			continue
		}
		fast++
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("message %d: readBack differs from the decoder\n got: %#v\nwant: %#v", i, got, want)
		}
	}
	if fast < 300 {
		t.Fatalf("only %d of 3000 random messages took the fast path; the test compares too few", fast)
	}
}

// randomPlain returns a random message of the kinds readBack and
// appendPlain answer for, its strings drawn from bytes that need escaping
// (invalid UTF-8 among them), its time in several zones or none.
func randomPlain(rng *rand.Rand) llm.Message {
	alphabet := []string{"a", "é", "\n", "\"", "\\", "<", "&", "\u2028", "\u2029", "\x00", "\x1f", "\x7f", "\b", "\f", "\t", "\r", "\xff", "\xe2\x82", "😀", " ", "/"}
	str := func() string {
		s := ""
		for range rng.IntN(6) {
			s += alphabet[rng.IntN(len(alphabet))]
		}
		return s
	}
	zones := []*time.Location{time.UTC, time.FixedZone("", -7*3600), time.FixedZone("X", 5*3600+1800), time.FixedZone("S", 3600+17), time.Local}
	m := llm.Message{Role: []llm.Role{llm.RoleUser, llm.RoleAssistant, llm.RoleSystem}[rng.IntN(3)]}
	switch rng.IntN(8) {
	case 0: // nil parts; an assistant message needs some (docs/reliability.md#every-turn-ends-with-something-to-read)
		m.Role = llm.RoleUser
	case 1:
		m.Role = llm.RoleUser
		m.Parts = []llm.Part{}
	default:
		for range 1 + rng.IntN(3) {
			kind := llm.PartText
			if m.Role == llm.RoleAssistant && rng.IntN(2) == 0 {
				kind = llm.PartThinking
			}
			m.Parts = append(m.Parts, llm.Part{Kind: kind,
				Text: str(), Summary: str(), Gist: str(), Signature: str(), Redacted: rng.IntN(2) == 0})
		}
	}
	if rng.IntN(4) > 0 {
		m.Time = time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)).In(zones[rng.IntN(len(zones))])
	}
	if rng.IntN(2) == 0 {
		m.Meta = &llm.Meta{Route: str(), Provider: str(), API: str(), Model: str(), StopReason: llm.StopReason(str()), Synthetic: rng.IntN(2) == 0}
		if rng.IntN(2) == 0 {
			m.Meta.Usage = llm.Usage{InputTokens: rng.IntN(3) * 70000, OutputTokens: rng.IntN(2), CacheReadTokens: rng.IntN(2) * -5,
				CacheWriteTokens: rng.IntN(2), ReasoningTokens: rng.IntN(2) * 1 << 40}
		}
		for range rng.IntN(3) {
			m.Meta.MessageIDs = append(m.Meta.MessageIDs, str())
		}
	}
	return m
}

// appendPlain writes what encoding/json writes, byte for byte, for every
// message it answers for, and answers for all of randomPlain's.
func TestAppendPlainIsEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 11))
	encoded := func(m llm.Message) string {
		enc := newEncoder()
		if err := enc.enc.Encode(m); err != nil {
			t.Fatalf("encode: %v", err)
		}
		return strings.TrimSuffix(enc.buf.String(), "\n")
	}
	for i := range 5000 {
		m := randomPlain(rng)
		got, ok := appendPlain([]byte("prefix"), &m)
		if !ok {
			t.Fatalf("message %d: appendPlain refused %#v", i, m)
		}
		if want := "prefix" + encoded(m); string(got) != want {
			t.Fatalf("message %d: appendPlain differs from encoding/json\n got: %s\nwant: %s", i, got, want)
		}
	}
	stamp := time.Date(2026, 11, 26, 21, 4, 5, 0, time.UTC)
	refused := []struct {
		name string
		m    llm.Message
	}{
		{"tool call", llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartToolCall, Call: &llm.ToolCall{ID: "c", Name: "n"}}}, Time: stamp}},
		{"tool result", llm.Message{Role: llm.RoleTool, Parts: []llm.Part{{Kind: llm.PartToolResult, Result: &llm.ToolResult{ToolCallID: "c"}}}}},
		{"image", llm.Message{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartImage, Image: &llm.Image{URL: "u"}}}}},
		{"file", llm.Message{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartFileRef, File: &llm.FileRef{Path: "p"}}}}},
		{"year 10000", llm.Message{Role: llm.RoleUser, Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"year -1", llm.Message{Role: llm.RoleUser, Time: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"a zone 24 hours off", llm.Message{Role: llm.RoleUser, Time: stamp.In(time.FixedZone("", 24*3600))}},
	}
	for _, tt := range refused {
		if got, ok := appendPlain([]byte("x"), &tt.m); ok || string(got) != "x" {
			t.Errorf("%s: appendPlain = %q, %v; want it refused and nothing appended", tt.name, got, ok)
		}
	}
}

// TestReadBackKnowsEveryField fails when a message type gains a field, so
// that whoever adds it decides whether readBack copies it as it reads back
// or must send such messages through the decoder.
func TestReadBackKnowsEveryField(t *testing.T) {
	known := map[reflect.Type][]string{
		reflect.TypeFor[llm.Message](): {"Role", "Parts", "Time", "Meta"},
		reflect.TypeFor[llm.Part]():    {"Kind", "Text", "Summary", "Gist", "Signature", "Redacted", "Call", "Result", "Image", "File"},
		reflect.TypeFor[llm.Meta]():    {"Route", "Provider", "API", "Model", "Usage", "StopReason", "Synthetic", "MessageIDs"},
		reflect.TypeFor[llm.Usage]():   {"InputTokens", "OutputTokens", "CacheReadTokens", "CacheWriteTokens", "ReasoningTokens"},
	}
	for typ, want := range known {
		var got []string
		for f := range typ.Fields() {
			got = append(got, f.Name)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s has fields %v; readBack knows %v: teach readBack the new field (or exclude such messages), then update this list", typ, got, want)
		}
	}
}
