package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/openaifake"
)

// The container image sets NANOBOT_CONFIG=/data/config.yaml: onboard must
// then put the workspace beside it and every command must use it.
func TestConfigPathFromEnvironment(t *testing.T) {
	e := &env{t: t, home: t.TempDir(), script: &fakellm.Script{}}
	e.llm = openaifake.New(t, e.script)
	data := filepath.Join(e.home, "data")
	cmd := exec.Command(binary, "onboard")
	cmd.Env = e.environ("NANOBOT_CONFIG=" + filepath.Join(data, "config.yaml"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("onboard: %v\n%s", err, out)
	}
	for _, p := range []string{"config.yaml", "workspace/AGENTS.md"} {
		if _, err := os.Stat(filepath.Join(data, p)); err != nil {
			t.Errorf("onboard with NANOBOT_CONFIG did not write %s: %v", p, err)
		}
	}
	e.script.Push(fakellm.Reply{Text: "from the data dir"})
	cmd = exec.Command(binary, "agent", "-m", "hi")
	cmd.Env = e.environ("NANOBOT_CONFIG=" + filepath.Join(data, "config.yaml"))
	if out, err := cmd.Output(); err != nil || strings.TrimSpace(string(out)) != "from the data dir" {
		t.Errorf("agent with NANOBOT_CONFIG: %v %q", err, out)
	}
	if _, err := os.Stat(filepath.Join(data, "sessions", "cli_local.jsonl")); err != nil {
		t.Errorf("the session was not written in the data dir's sessions/: %v", err)
	}
}
