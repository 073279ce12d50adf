package history

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/llm"
)

func TestRepair(t *testing.T) {
	tests := []struct {
		name string
		in   []llm.Message
		want string
	}{
		{"clean", []llm.Message{user("q"), call("1", "2"), results("1", "2"), assistant("a")}, "u c(1,2) t(1,2) a"},
		{"leading orphan result and assistant", []llm.Message{results("9"), assistant("x"), user("q"), assistant("a")}, "u a"},
		{"missing result", []llm.Message{user("q"), call("1", "2"), results("2"), user("q2")}, "u c(1,2) t(1!,2) u"},
		{"no tool message at all", []llm.Message{user("q"), call("1"), user("q2")}, "u c(1) t(1!) u"},
		{"results out of order", []llm.Message{user("q"), call("1", "2"), results("2", "1")}, "u c(1,2) t(1,2)"},
		{"orphan result dropped", []llm.Message{user("q"), call("1"), results("1", "7"), assistant("a")}, "u c(1) t(1) a"},
		{"tool message after text reply", []llm.Message{user("q"), assistant("a"), results("1"), user("q2")}, "u a u"},
		{"empty", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Repair(tt.in)
			if s := shape(got); s != tt.want {
				t.Fatalf("Repair = %q, want %q", s, tt.want)
			}
			for _, m := range got {
				if err := m.Validate(); err != nil {
					t.Errorf("invalid message after repair: %v", err)
				}
			}
		})
	}
}

func TestProjectCutsAtUserTurns(t *testing.T) {
	big := strings.Repeat("x", 400) // ~100 tokens
	msgs := []llm.Message{
		user(big), assistant(big), // turn 1
		user(big), call("1"), results("1"), assistant(big), // turn 2
		user("newest"), // turn 3
	}
	tests := []struct {
		name    string
		budget  int
		want    string
		omitted int
	}{
		{"unlimited keeps all", 0, "u a u c(1) t(1) a u", 0},
		{"room for two turns", 300, "u c(1) t(1) a u", 2},
		{"room for newest only", 20, "u", 6},
		{"newest kept even over budget", 1, "u", 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Project("", msgs, Options{Budget: tt.budget})
			if s := shape(v.Messages); s != tt.want {
				t.Fatalf("Project = %q, want %q", s, tt.want)
			}
			if v.Omitted != tt.omitted {
				t.Errorf("omitted = %d, want %d", v.Omitted, tt.omitted)
			}
			if tt.budget > 1 && v.Tokens > tt.budget {
				t.Errorf("tokens %d over budget %d", v.Tokens, tt.budget)
			}
		})
	}
}

// Gemini's thought signatures ride on tool_call parts and on thinking parts
// without text; projection, which re-renders tool results at lower detail,
// must hand them back untouched, or Gemini refuses the next call of a tool
// loop.
func TestProjectKeepsSignatures(t *testing.T) {
	turn := llm.Message{Role: llm.RoleAssistant, Meta: &llm.Meta{API: "gemini"}, Parts: []llm.Part{
		{Kind: llm.PartThinking, Signature: "c2lnLXRleHQ="},
		{Kind: llm.PartToolCall, Signature: "c2lnLWNhbGw=", Call: &llm.ToolCall{ID: "1", Name: "read_file", Arguments: json.RawMessage(`{}`)}},
	}}
	msgs := []llm.Message{user("old"), turn, results("1"), user("newest"), turn, results("1")}
	for _, budget := range []int{0, 60} {
		v := Project("", msgs, Options{Budget: budget})
		for _, m := range v.Messages {
			if m.Role != llm.RoleAssistant {
				continue
			}
			if m.Parts[0].Signature != "c2lnLXRleHQ=" || m.Parts[1].Signature != "c2lnLWNhbGw=" {
				t.Errorf("budget %d: projected parts %+v lost a signature", budget, m.Parts)
			}
		}
	}
}

// TestProjectWithKnownSystemTokens: passing the system prompt's estimate in
// Options.SystemTokens gives the View that estimating it in Project gives,
// including where the prompt's size decides how much history fits.
func TestProjectWithKnownSystemTokens(t *testing.T) {
	session := genSession(3, "k", 60)
	tests := []struct {
		name   string
		system string
		budget int
	}{
		{"no system prompt", "", 4000},
		{"short prompt, no budget", testSystem, 0},
		{"short prompt", testSystem, 4000},
		{"long prompt", strings.Repeat("Follow the rules in AGENTS.md. ", 300), 4000},
		{"prompt over the budget", strings.Repeat("Follow the rules in AGENTS.md. ", 300), 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := Project(tt.system, session, Options{Budget: tt.budget})
			got := Project(tt.system, session, Options{Budget: tt.budget, SystemTokens: EstimateText(tt.system)})
			if jsonOf(t, got) != jsonOf(t, want) {
				t.Errorf("View with SystemTokens differs: %d messages, %d tokens; estimating: %d messages, %d tokens",
					len(got.Messages), got.Tokens, len(want.Messages), want.Tokens)
			}
		})
	}
}

// TestMapParts covers the copy both renderings make: f's parts in a new
// slice, the rest of the message kept, the original's parts untouched.
func TestMapParts(t *testing.T) {
	upper := func(p llm.Part) llm.Part { p.Text = strings.ToUpper(p.Text); return p }
	tests := []struct {
		name  string
		parts []llm.Part
		want  []string
	}{
		{"empty", []llm.Part{}, nil},
		{"each part mapped, in order", []llm.Part{llm.Text("a"), llm.Text("b")}, []string{"A", "B"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := llm.Message{Role: llm.RoleUser, Parts: tt.parts, Meta: &llm.Meta{Route: "r"}}
			out := mapParts(m, upper)
			var got []string
			for _, p := range out.Parts {
				got = append(got, p.Text)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") || out.Role != m.Role || out.Meta != m.Meta {
				t.Errorf("mapParts = %+v, want texts %v and the role and meta kept", out, tt.want)
			}
			for i, p := range m.Parts {
				if p.Text != strings.ToLower(p.Text) || (len(out.Parts) > 0 && &out.Parts[i] == &m.Parts[i]) {
					t.Errorf("the original's part %d changed or is shared: %+v", i, p)
				}
			}
		})
	}
}
