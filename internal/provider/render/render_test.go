package render

import (
	"slices"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nanobot-go/nanobot/internal/llm"
)

func TestAppendUser(t *testing.T) {
	text := func(s string) string { return "text:" + s }
	image := func(img llm.Image) string { return "image:" + img.MIME }
	tests := []struct {
		name  string
		parts []llm.Part
		want  []string
		warns int
	}{
		{"text", []llm.Part{{Kind: llm.PartText, Text: "hi"}}, []string{"start", "text:hi"}, 0},
		{"blank text skipped", []llm.Part{{Kind: llm.PartText, Text: " \n"}}, []string{"start"}, 0},
		{"image", []llm.Part{{Kind: llm.PartImage, Image: &llm.Image{MIME: "image/png"}}}, []string{"start", "image:image/png"}, 0},
		{"image without its data skipped", []llm.Part{{Kind: llm.PartImage}}, []string{"start"}, 0},
		{"file as a note", []llm.Part{{Kind: llm.PartFileRef, File: &llm.FileRef{Path: "inbox/a.pdf"}}}, []string{"start", "text:[file: inbox/a.pdf]"}, 0},
		{"tool result logged and skipped", []llm.Part{{Kind: llm.PartToolResult, Result: &llm.ToolResult{}}, {Kind: llm.PartText, Text: "b"}}, []string{"start", "text:b"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zap.WarnLevel)
			got := AppendUser([]string{"start"}, tt.parts, zap.New(core), text, image)
			if !slices.Equal(got, tt.want) {
				t.Errorf("AppendUser = %q, want %q", got, tt.want)
			}
			if logs.Len() != tt.warns {
				t.Errorf("%d warnings, want %d", logs.Len(), tt.warns)
			}
		})
	}
}

func TestToolResults(t *testing.T) {
	result := func(id string) llm.Part {
		return llm.Part{Kind: llm.PartToolResult, Result: &llm.ToolResult{ToolCallID: id}}
	}
	tests := []struct {
		name  string
		parts []llm.Part
		want  []string
		warns []string
	}{
		{"in order", []llm.Part{result("a"), result("b")}, []string{"a", "b"}, nil},
		{"not a result", []llm.Part{{Kind: llm.PartText, Text: "x"}, {Kind: llm.PartToolResult}, result("a")}, []string{"a"},
			[]string{"skipping part not allowed in a tool message", "skipping part not allowed in a tool message"}},
		{"without its call", []llm.Part{result("zz"), result("b")}, []string{"b"}, []string{"dropping tool result without its call"}},
		{"second for one call", []llm.Part{result("a"), result("a")}, []string{"a"}, []string{"dropping second tool result for one call"}},
		{"answered before", []llm.Part{result("c")}, nil, []string{"dropping second tool result for one call"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zap.WarnLevel)
			known := func(id string) bool { return id == "a" || id == "b" || id == "c" }
			taken := map[string]bool{"c": true}
			var got []string
			for res := range ToolResults(tt.parts, zap.New(core), known, func(id string) bool { return taken[id] }) {
				got = append(got, res.ToolCallID)
				taken[res.ToolCallID] = true
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("yielded %q, want %q", got, tt.want)
			}
			var warns []string
			for _, e := range logs.All() {
				warns = append(warns, e.Message)
			}
			if !slices.Equal(warns, tt.warns) {
				t.Errorf("warnings %q, want %q", warns, tt.warns)
			}
		})
	}
}

func TestFileNote(t *testing.T) {
	tests := []struct {
		f    llm.FileRef
		want string
	}{
		{llm.FileRef{Path: "media/report.pdf", Name: "report.pdf", MIME: "application/pdf", Size: 48213}, "[file: media/report.pdf (name report.pdf, application/pdf, 48213 bytes)]"},
		{llm.FileRef{Path: "media/a.txt", Name: "media/a.txt", Size: 12}, "[file: media/a.txt (12 bytes)]"},
		{llm.FileRef{Path: "media/c"}, "[file: media/c]"},
	}
	for _, tt := range tests {
		if got := FileNote(tt.f); got != tt.want {
			t.Errorf("FileNote(%+v) = %q, want %q", tt.f, got, tt.want)
		}
	}
}
