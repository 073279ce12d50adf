package main

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/openaifake"
)

// runWith runs the binary with stdin and extra environment (later entries
// win) and returns stdout and stderr.
func (e *env) runWith(stdin string, extra []string, args ...string) (string, string, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = e.environ(extra...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// A provider that cannot be reached (nothing listens on the port; a name
// that does not resolve) is named in the answer, in the terminal and in
// /status: the host and why, never the URL's path or a key.
func TestUnreachableProviderIsNamedInTheTerminalAndStatus(t *testing.T) {
	closed := freeAddr(t)
	tests := []struct {
		name    string
		baseURL string
		reason  string
	}{
		{"connection refused", "http://" + closed + "/v1", "cannot reach " + closed + ": connection refused"},
		{"no such host", "https://llm.nanobot-e2e.invalid/v1", "cannot reach llm.nanobot-e2e.invalid: no such host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			vars := []string{"NANOBOT_PROVIDERS_OPENAI_BASE_URL=" + tt.baseURL, "NANOBOT_PROVIDERS_OPENAI_MAX_RETRIES=0"}

			out, stderr, err := e.runWith("", vars, "agent", "-m", "hello")
			if err == nil {
				t.Fatalf("agent -m succeeded against an unreachable provider:\n%s%s", out, stderr)
			}
			if !strings.Contains(out, "The model provider did not answer: "+tt.reason+". ") {
				t.Errorf("agent -m printed %q, want the reason %q", out, tt.reason)
			}

			out, stderr, err = e.runWith("hello\n/status\n", vars, "agent")
			if err != nil {
				t.Fatalf("agent REPL: %v\n%s", err, stderr)
			}
			if !strings.Contains(out, "The model provider did not answer: "+tt.reason+". ") {
				t.Errorf("the REPL's answer lacks %q:\n%s", tt.reason, out)
			}
			if !strings.Contains(out, "Model provider: the last call, ") || !strings.Contains(out, "ago, failed: "+tt.reason) {
				t.Errorf("/status lacks the provider's failure %q:\n%s", tt.reason, out)
			}
			for _, secret := range []string{openaifake.DefaultAPIKey, "/v1", "chat/completions"} {
				if strings.Contains(out, secret) {
					t.Errorf("the terminal shows %q:\n%s", secret, out)
				}
			}
		})
	}
}
