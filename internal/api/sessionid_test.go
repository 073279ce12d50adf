package api_test

import (
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// TestEveryAllowedSessionIDIsAnswered: a session id of 128 characters of
// each class docs/api.md allows (upper case, '@', '+' and '_' take three
// bytes each in the file name) is answered 200 and its session is kept,
// through X-Session-Id and the user field alike. It was 500 "could not read
// this chat's history" for 64 × B (issue 28, finding 5).
func TestEveryAllowedSessionIDIsAnswered(t *testing.T) {
	h := newHarness(t)
	h.script.Func = func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Text: "ok"} }
	for _, tt := range []struct{ name, chars string }{
		{"upper", "B"}, {"lower", "b"}, {"digits", "7"}, {"dot", "."}, {"underscore", "_"},
		{"at", "@"}, {"plus", "+"}, {"dash", "-"}, {"mixed", "A.z_9@+-Q"},
	} {
		id := strings.Repeat(tt.chars, 128/len(tt.chars)+1)[:128]
		t.Run(tt.name, func(t *testing.T) {
			code, body := h.raw(webuiToken, `{"model":"nanobot","messages":[{"role":"user","content":"hi"}]}`, "X-Session-Id", id)
			if code != 200 {
				t.Fatalf("X-Session-Id of 128 %s: status %d: %s", tt.name, code, body)
			}
			code, body = h.raw(scriptToken, `{"model":"nanobot","user":"`+id+`","messages":[{"role":"user","content":"hi"}]}`)
			if code != 200 {
				t.Fatalf("user of 128 %s: status %d: %s", tt.name, code, body)
			}
			for _, key := range []string{"api:webui:" + id, "api:script:" + id} {
				if msgs := h.session(key); len(msgs) != 2 || msgs[1].Text() != "ok" {
					t.Errorf("%s: %d messages, want the question and the answer", key, len(msgs))
				}
			}
		})
	}
}
