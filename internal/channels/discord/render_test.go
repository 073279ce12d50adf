package discord

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/nanobot-go/nanobot/internal/testkit/golden"
)

// chunkSep separates chunks in the golden files.
const chunkSep = "\n-------- chunk --------\n"

func TestRenderGolden(t *testing.T) {
	inputs, _ := filepath.Glob("testdata/render/*.md")
	if len(inputs) == 0 {
		t.Fatal("no inputs")
	}
	r := NewRenderer(0)
	for _, in := range inputs {
		t.Run(filepath.Base(in), func(t *testing.T) {
			md, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			chunks := r.Render(string(md))
			for i, c := range chunks {
				if n := utf8.RuneCountInString(c); n > MaxMessageRunes {
					t.Errorf("chunk %d: %d characters", i, n)
				}
				if n := strings.Count(c, "\n") + 1; n > DefaultMaxLines {
					t.Errorf("chunk %d: %d lines", i, n)
				}
				if strings.Count(c, "```")%2 != 0 {
					t.Errorf("chunk %d leaves a fence open", i)
				}
			}
			got := strings.Join(chunks, chunkSep) + "\n"
			golden.Check(t, strings.TrimSuffix(in, ".md")+".golden", []byte(got))
		})
	}
}

func TestToDiscord(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain markdown passes through", "**bold** _it_ `code` [link](https://x.y)\n- item", "**bold** _it_ `code` [link](https://x.y)\n- item"},
		{"h1-h3 kept", "# A\n## B\n### C", "# A\n## B\n### C"},
		{"h4+ become bold", "#### Deep ####\n###### Deeper", "**Deep**\n**Deeper**"},
		{"table fenced", "| a | b |\n|---|---|\n| 1 | 2 |\ntext", "```\n| a | b |\n|---|---|\n| 1 | 2 |\n```\ntext"},
		{"pipe without separator is text", "a | b\nc | d", "a | b\nc | d"},
		{"tilde fence respected", "~~~\n#### x\n~~~", "~~~\n#### x\n~~~"},
	}
	for _, tt := range tests {
		if got := ToDiscord(tt.in); got != tt.want {
			t.Errorf("%s: ToDiscord(%q) = %q, want %q", tt.name, tt.in, got, tt.want)
		}
	}
}

func TestStripAndReplaceMentions(t *testing.T) {
	if got := stripBotMention("<@1> hi <@!1> <@2> <@&5> <@&6>", "1", []string{"5"}); got != " hi  <@2>  <@&6>" {
		t.Errorf("stripBotMention = %q", got)
	}
}
