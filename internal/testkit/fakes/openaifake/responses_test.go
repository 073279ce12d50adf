package openaifake_test

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/openaifake"
)

// TestResponsesStrictness: /v1/responses refuses what the real API refuses,
// and accepts a well-formed tool round with replayed reasoning.
func TestResponsesStrictness(t *testing.T) {
	enc := base64.StdEncoding.EncodeToString([]byte("openaifake reasoning rs_1"))
	call := `{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"}`
	output := `{"type":"function_call_output","call_id":"c1","output":"ok"}`
	user := `{"role":"user","content":"hi"}`
	body := func(store, items string) string {
		return `{"model":"gpt-5","stream":true,"store":` + store + `,"input":[` + items + `]}`
	}
	cases := []struct {
		name, body, want string
	}{
		{"valid round", body("false", user+`,{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"`+enc+`"},`+call+`,`+output), ""},
		{"output without its call", body("false", user+`,`+output), "No tool call found for function call output with call_id c1"},
		{"output before its call", body("false", user+`,`+output+`,`+call), "No tool call found"},
		{"call without output", body("false", user+`,`+call), "No tool output found for function call c1"},
		{"reasoning without encrypted content, store false", body("false", user+`,{"type":"reasoning","id":"rs_1","summary":[]},`+call+`,`+output), "Items are not persisted when `store` is set to false"},
		{"reasoning altered", body("false", user+`,{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"x"},`+call+`,`+output), "could not be verified"},
		{"reasoning last", body("false", user+`,{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"`+enc+`"}`), "without its required following item"},
		{"chat-style content part", body("false", `{"role":"user","content":[{"type":"text","text":"hi"}]}`), "Invalid value: 'text'"},
		{"chat-style tool", `{"model":"gpt-5","stream":true,"input":[` + user + `],"tools":[{"type":"function","function":{"name":"f"}}]}`, "tools[0].name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			script := &fakellm.Script{}
			script.Push(fakellm.Reply{Text: "fine"})
			fake := openaifake.New(t, script)
			status, got := post(t, fake, "/responses", tc.body)
			if tc.want == "" {
				if status != http.StatusOK || !strings.Contains(string(got), "response.completed") {
					t.Fatalf("status %d: %s", status, got)
				}
				return
			}
			if status != http.StatusBadRequest || !strings.Contains(string(got), tc.want) {
				t.Errorf("status %d body %s, want 400 containing %q", status, got, tc.want)
			}
		})
	}
}
