package history

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/nanobot-go/nanobot/internal/llm"
)

func TestDetailGist(t *testing.T) {
	readNotes := llm.ToolCall{ID: "c1", Name: "read_file", Arguments: json.RawMessage(`{"path":"notes.md","offset":10,"limit":200,"extra":true}`)}
	tests := []struct {
		name string
		call llm.ToolCall
		res  llm.ToolResult
		want string
	}{
		{
			name: "ok with size and lines, arguments in the model's order, at most three",
			call: readNotes,
			res:  llm.ToolResult{Name: "read_file", Content: llm.PlainContent(strings.Repeat("x", 35) + "\n" + lines("n", 339))},
			want: `read_file(path="notes.md", offset=10, limit=200, …) → ok, 18.6 KiB, 340 lines`,
		},
		{
			name: "error quotes the start of the message",
			call: llm.ToolCall{ID: "c2", Name: "exec", Arguments: json.RawMessage(`{"command":"make test"}`)},
			res:  llm.ToolResult{Name: "exec", IsError: true, Content: llm.PlainContent("error: exit status 2\n" + strings.Repeat("FAIL ", 400))},
			want: `exec(command="make test") → error: "error: exit status 2 FAIL FAIL FAIL FAIL FAIL FAIL FAIL FAIL FAIL FAIL FAIL FAI…"`,
		},
		{
			name: "long values clipped, objects elided, images counted",
			call: llm.ToolCall{ID: "c3", Name: "web_fetch", Arguments: json.RawMessage(`{"url":"https://example.com/a/very/long/path/that/goes/on/and/on/and/on","headers":{"a":"b"}}`)},
			res:  llm.ToolResult{Name: "web_fetch", Content: llm.PlainContent(lines("w", 30)), Images: []llm.Image{{MIME: "image/png", Path: "a.png"}}},
			want: `web_fetch(url="https://example.com/a/very/long/path/th…", headers={…}) → ok, 1.6 KiB, 30 lines, 1 image`,
		},
		{
			name: "arguments that did not parse",
			call: llm.ToolCall{ID: "c4", Name: "exec", RawArgs: `{"command": "ls`, ParseError: "bad json"},
			res:  llm.ToolResult{Name: "exec", IsError: true, Content: llm.PlainContent(strings.Repeat("the arguments were not valid JSON; ", 10))},
			want: `exec(invalid arguments) → error: "the arguments were not valid JSON; the arguments were not valid JSON; the argum…"`,
		},
		{
			name: "empty output",
			call: llm.ToolCall{ID: "c5", Name: "list_dir", Arguments: json.RawMessage(`{}`)},
			res:  llm.ToolResult{Name: "list_dir", Content: llm.PlainContent(""), Images: []llm.Image{{}, {}}},
			want: `list_dir() → ok, empty, 2 images`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Detail(tt.call, tt.res)
			if c.Live != tt.res.Content.Live {
				t.Errorf("Live changed")
			}
			if c.Gist != tt.want {
				t.Errorf("gist\n got %s\nwant %s", c.Gist, tt.want)
			}
			if strings.Contains(c.Gist, "\n") {
				t.Errorf("gist spans lines: %q", c.Gist)
			}
		})
	}
}

func TestDetailSummary(t *testing.T) {
	call := llm.ToolCall{ID: "c1", Name: "read_file", Arguments: json.RawMessage(`{"path":"big.md"}`)}
	tests := []struct {
		name   string
		live   string
		marker string // "" when Summary must be absent
	}{
		{"short result is only live", "hello", ""},
		{"at the threshold no summary", strings.Repeat("a", summaryThreshold), ""},
		{"lines cut at line breaks", lines("big", 200), "[… 177 lines, 10,266 characters omitted …]"},
		{"one long line cut at rune boundaries", strings.Repeat("日本語", 1000), "[… 0 lines, 2,534 characters omitted …]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Detail(call, llm.ToolResult{Name: "read_file", Content: llm.PlainContent(tt.live)})
			if tt.marker == "" {
				if c.Summary != "" {
					t.Fatalf("summary stored for a short result: %q", c.Summary)
				}
				if c.At(llm.Summary) != tt.live {
					t.Errorf("summary level does not fall back to live")
				}
				return
			}
			s := c.Summary
			if !strings.Contains(s, tt.marker) {
				t.Fatalf("summary lacks marker %q:\n%s", tt.marker, s)
			}
			if len(s) > summaryHead+summaryTail+100 {
				t.Errorf("summary is %d bytes", len(s))
			}
			if !utf8.ValidString(s) {
				t.Errorf("summary is not valid UTF-8")
			}
			head, tail, _ := strings.Cut(s, "[…")
			if !strings.HasPrefix(tt.live, head[:len(head)-1]) {
				t.Errorf("summary does not start with the head of the text")
			}
			_, tail, _ = strings.Cut(tail, "…]\n")
			if !strings.HasSuffix(tt.live, tail) {
				t.Errorf("summary does not end with the tail of the text")
			}
			if c.Gist == "" || len(c.Gist) > 120 {
				t.Errorf("gist %q", c.Gist)
			}
		})
	}
}

func TestDetailStoresRenderingsOnce(t *testing.T) {
	call := llm.ToolCall{ID: "c1", Name: "write_file", Arguments: json.RawMessage(`{"path":"a.md","content":"hello"}`)}
	c := Detail(call, llm.ToolResult{Name: "write_file", Content: llm.PlainContent("wrote 5 bytes")})
	if c != (llm.Content{Live: "wrote 5 bytes"}) {
		t.Errorf("a short result stored more than Live: %+v", c)
	}
	b, _ := json.Marshal(c)
	if string(b) != `{"live":"wrote 5 bytes"}` {
		t.Errorf("stored as %s", b)
	}
	medium := lines("m", 10) // over the gist's length, under the summary threshold
	c = Detail(call, llm.ToolResult{Name: "write_file", Content: llm.PlainContent(medium)})
	if c.Summary != "" || c.Gist == "" {
		t.Errorf("medium result: summary %q gist %q", c.Summary, c.Gist)
	}
}

func TestDetailText(t *testing.T) {
	if s, g := DetailText("short question"); s != "" || g != "" {
		t.Errorf("short text got renderings %q %q", s, g)
	}
	doc := "[Mon 2025-01-06 10:00 UTC · telegram · chat 1]\nPlease review:\n" + lines("doc", 120)
	s, g := DetailText(doc)
	if !strings.Contains(s, "lines,") || len(s) >= len(doc) {
		t.Errorf("summary %q", s)
	}
	want := `[long message, 6.9 KiB, 122 lines: "[Mon 2025-01-06 10:00 UTC · telegram · chat 1] Please review: doc line 001: the…"]`
	if g != want {
		t.Errorf("gist\n got %s\nwant %s", g, want)
	}
}
