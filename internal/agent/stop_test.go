package agent

import (
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/provider"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// TestEveryTurnEndsVisibly: whatever way the model stops, the user reads
// something, and no assistant message without parts is saved
// (docs/reliability.md#every-turn-ends-with-something-to-read). The primary
// route may be asked again once; "backup" is its fallback.
func TestEveryTurnEndsVisibly(t *testing.T) {
	cut := "… (cut off: the model hit its output limit)"
	tests := []struct {
		name            string
		primary, backup []fakellm.Reply
		want            string // the final's content; a prefix when it ends in "*"
		isError         bool
		stop            llm.StopReason
		saved           string // the saved answer's text ("" when none is saved)
	}{
		{name: "an empty answer is asked again",
			primary: []fakellm.Reply{{}, {Text: "second time lucky"}},
			want:    "second time lucky", stop: llm.StopEnd, saved: "second time lucky"},
		{name: "thinking only, twice: the fallback answers",
			primary: []fakellm.Reply{{Thinking: "hmm"}, {Thinking: "hmm"}}, backup: []fakellm.Reply{{Text: "from the backup"}},
			want: "from the backup", stop: llm.StopEnd, saved: "from the backup"},
		{name: "a malformed call is asked again",
			primary: []fakellm.Reply{{Stop: llm.StopMalformedCall}, {Text: "fine now"}},
			want:    "fine now", stop: llm.StopEnd, saved: "fine now"},
		{name: "empty everywhere: a short notice, nothing saved",
			primary: []fakellm.Reply{{}, {}}, backup: []fakellm.Reply{{}},
			want: "⚠️ The model sent an empty or broken answer*", isError: true},
		{name: "a cut answer is delivered with a note",
			primary: []fakellm.Reply{{Text: "The first half of the answer", Stop: llm.StopLength}},
			want:    "The first half of the answer\n\n" + cut, stop: llm.StopLength, saved: "The first half of the answer"},
		{name: "cut with only thinking: the notice, not silence",
			primary: []fakellm.Reply{{Thinking: "a very long thought", Stop: llm.StopLength}},
			want:    "⚠️ The model hit its output limit before it wrote an answer*", stop: llm.StopLength},
		{name: "a refusal says so",
			primary: []fakellm.Reply{{Stop: llm.StopRefusal}},
			want:    "⚠️ The model declined to answer this.", stop: llm.StopRefusal, saved: "⚠️ The model declined to answer this."},
		{name: "a filter cutting the text says so",
			primary: []fakellm.Reply{{Text: "Here is how", Stop: llm.StopSafety}},
			want:    "Here is how\n\n… (stopped by the model provider's safety filter)", stop: llm.StopSafety, saved: "Here is how"},
		{name: "recitation withheld everything",
			primary: []fakellm.Reply{{Stop: llm.StopRecitation}},
			want:    "⚠️ The model provider withheld the answer because it would have quoted protected text.", stop: llm.StopRecitation,
			saved: "⚠️ The model provider withheld the answer because it would have quoted protected text."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			primary, backup := &fakellm.Script{}, &fakellm.Script{}
			primary.Push(tt.primary...)
			backup.Push(tt.backup...)
			h := newHarnessDeps(t, func(d *Deps) {
				d.Model = provider.NewRouter(map[string]provider.Streamer{
					"openai": &fakellm.Streamer{Name: "openai", Script: primary},
					"backup": &fakellm.Streamer{Name: "backup", Script: backup},
				}, provider.Options{Default: "openai/gpt-4o-mini", DefaultFallbacks: []string{"backup/model-b"},
					MaxRetries: map[string]int{"openai": 1, "backup": 0}}, zaptest.NewLogger(t))
			})
			h.send("c1", "question")
			f := h.waitFinals("c1", 1)[0]
			if prefix, ok := strings.CutSuffix(tt.want, "*"); (ok && !strings.HasPrefix(f.Content, prefix)) || (!ok && f.Content != tt.want) {
				t.Errorf("final = %q, want %q", f.Content, tt.want)
			}
			if f.IsError != tt.isError || f.Stop != tt.stop {
				t.Errorf("final error %v stop %q, want %v %q", f.IsError, f.Stop, tt.isError, tt.stop)
			}
			if pending := primary.Pending() + backup.Pending(); pending != 0 {
				t.Errorf("%d scripted replies never asked for", pending)
			}
			snap, err := h.store.Get("test:c1")
			if err != nil {
				t.Fatal(err)
			}
			var saved []llm.Message
			for _, m := range snap.Messages {
				if err := m.Validate(); err != nil {
					t.Errorf("saved an invalid message: %v", err)
				}
				if m.Role == llm.RoleAssistant {
					saved = append(saved, m)
				}
			}
			switch {
			case tt.saved == "" && tt.stop == llm.StopLength:
				// The thinking is kept, with its stop reason.
				if len(saved) != 1 || saved[0].Text() != "" || saved[0].Stop() != llm.StopLength {
					t.Errorf("saved answers %+v", saved)
				}
			case tt.saved == "":
				if len(saved) != 0 {
					t.Errorf("saved answers %+v, want none", saved)
				}
			case len(saved) != 1 || saved[0].Text() != tt.saved || saved[0].Stop() != tt.stop:
				t.Errorf("saved answers %+v, want one reading %q", saved, tt.saved)
			}
		})
	}
}

// TestAnswerTextTable reads the stop rows of llm's table whole: each noted
// stop reason has both a note for a cut text and a notice for no text.
func TestAnswerTextTable(t *testing.T) {
	for _, stop := range []llm.StopReason{llm.StopLength, llm.StopRefusal, llm.StopSafety, llm.StopRecitation} {
		f, ok := llm.ClassifyStop(stop)
		if !ok || f.Note == "" || f.UserText() == "" {
			t.Errorf("%s: noted %v, note %q, notice %q", stop, ok, f.Note, f.UserText())
		}
		msg := llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text("x")}, Meta: &llm.Meta{StopReason: stop}}
		if got := answerText(msg, nil); got != "x\n\n"+f.Note {
			t.Errorf("%s: %q", stop, got)
		}
		msg.Parts = nil
		if got := answerText(msg, nil); got != f.UserText() {
			t.Errorf("%s with no text: %q, want %q", stop, got, f.UserText())
		}
	}
	for _, stop := range []llm.StopReason{llm.StopEnd, llm.StopOther, ""} {
		msg := llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text("x")}, Meta: &llm.Meta{StopReason: stop}}
		if got := answerText(msg, nil); got != "x" {
			t.Errorf("%q: %q", stop, got)
		}
	}
}
