package jsstore_test

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// sampleTurn holds one message of every part kind, with fixed times, so a
// round trip can be compared exactly.
func sampleTurn() []llm.Message {
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	return []llm.Message{
		{Role: llm.RoleSystem, Time: at(0), Parts: []llm.Part{llm.Text("You are nanobot.")}},
		{Role: llm.RoleUser, Time: at(1), Parts: []llm.Part{
			{Kind: llm.PartText, Text: "long paste <b>&</b> " + strings.Repeat("x", 40), Summary: "long paste […]", Gist: "user pasted 60 chars"},
			{Kind: llm.PartImage, Image: &llm.Image{MIME: "image/png", Data: []byte{0x89, 'P', 'N', 'G', 0, 1, 2}}},
			{Kind: llm.PartImage, Image: &llm.Image{MIME: "image/jpeg", URL: "https://example.com/cat.jpg"}},
			{Kind: llm.PartImage, Image: &llm.Image{MIME: "image/webp", Path: "media/x.webp"}},
			{Kind: llm.PartFileRef, File: &llm.FileRef{Path: "media/report.pdf", MIME: "application/pdf", Size: 12345, Name: "report.pdf"}},
		}},
		{Role: llm.RoleAssistant, Time: at(2), Parts: []llm.Part{
			{Kind: llm.PartThinking, Text: "The user wants the report read.", Signature: "sig-AbC123=="},
			{Kind: llm.PartThinking, Text: "ENCRYPTED-PAYLOAD", Redacted: true},
			llm.Text("Let me look."),
			{Kind: llm.PartToolCall, Call: &llm.ToolCall{ID: "call_1", Name: "read_file", Arguments: json.RawMessage(`{"path":"media/report.pdf","limit":200}`)}},
			{Kind: llm.PartToolCall, Call: &llm.ToolCall{ID: "call_2", Name: "exec", RawArgs: `{"cmd": "ls`, ParseError: "unexpected end of JSON input"}},
		}, Meta: &llm.Meta{Route: "openai/gpt-4o-mini", Provider: "openai", API: "openai", Model: "gpt-4o-mini",
			Usage: llm.Usage{InputTokens: 1200, OutputTokens: 80, CacheReadTokens: 1000, ReasoningTokens: 30}, StopReason: "tool_calls"}},
		{Role: llm.RoleTool, Time: at(3), Parts: []llm.Part{
			{Kind: llm.PartToolResult, Result: &llm.ToolResult{ToolCallID: "call_1", Name: "read_file",
				Content: llm.Content{Live: "page 1\npage 2\npage 3", Summary: "page 1\n[…]\npage 3", Gist: "read_file media/report.pdf: ok, 3 lines"},
				Elapsed: 1500 * time.Millisecond}},
			{Kind: llm.PartToolResult, Result: &llm.ToolResult{ToolCallID: "call_2", Name: "exec", IsError: true,
				Content: llm.PlainContent("arguments are not valid JSON: unexpected end of JSON input"),
				Images:  []llm.Image{{MIME: "image/png", Path: "media/screen.png"}}}},
		}},
		{Role: llm.RoleAssistant, Time: at(4), Parts: []llm.Part{llm.Text("The report has 3 pages. ünïcödé ✓ 🚀")},
			Meta: &llm.Meta{Model: "gpt-4o-mini", Synthetic: true}},
	}
}
