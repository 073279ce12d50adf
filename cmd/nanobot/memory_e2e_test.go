package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// setAgentsConfig inserts lines under agents: in the onboarded config file.
func (e *env) setAgentsConfig(lines string) {
	e.t.Helper()
	p := filepath.Join(e.home, ".nanobot", "config.yaml")
	data, err := os.ReadFile(p)
	if err != nil {
		e.t.Fatal(err)
	}
	cfg := strings.Replace(string(data), "agents:\n", "agents:\n"+lines, 1)
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) readWorkspace(rel string) string {
	e.t.Helper()
	data, err := os.ReadFile(filepath.Join(e.workspace(), rel))
	if err != nil {
		e.t.Fatal(err)
	}
	return string(data)
}

// TestAgentConsolidatesMemory runs the real binary past memory_window: the
// one-shot agent consolidates before it exits (Run waits for it), over the
// OpenAI wire protocol with a forced tool call. (Replies are queued up front:
// the fake's Func would race with the requests arriving from the process.)
func TestAgentConsolidatesMemory(t *testing.T) {
	e := newEnv(t)
	e.setAgentsConfig("  memory_window: 10\n")
	template := e.readWorkspace("memory/MEMORY.md")
	for range 6 {
		e.script.Push(fakellm.Reply{Text: "ok"})
	}
	args, _ := json.Marshal(map[string]string{
		"history_entry": "Ada counted from zero to two.",
		"memory_update": template + "- Ada likes counting.\n",
	})
	e.script.Push(fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "call_save", Name: "save_memory", Args: string(args)}}})
	for i := range 6 {
		if _, stderr, err := e.run("agent", "-m", fmt.Sprintf("count %d", i)); err != nil {
			t.Fatalf("agent %d: %v\n%s", i, err, stderr)
		}
	}
	reqs := e.script.Requests()
	if len(reqs) != 7 || reqs[6].ToolChoice != "save_memory" || !strings.Contains(reqs[6].LastUserText(), template) {
		t.Fatalf("want 6 turns then one forced save_memory call showing MEMORY.md; got %d requests", len(reqs))
	}
	var consolidated float64
	for _, l := range e.sessionLines() {
		if c, ok := l["consolidated"].(float64); ok {
			consolidated = c
		}
	}
	if consolidated != 6 {
		t.Errorf("session offset record = %v, want 6", consolidated)
	}
	if mem := e.readWorkspace("memory/MEMORY.md"); mem != template+"- Ada likes counting.\n" {
		t.Errorf("MEMORY.md should be the template plus the new fact:\n%s", mem)
	}
	hist := e.readWorkspace("memory/HISTORY.md")
	if !regexp.MustCompile(`\n\n\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}\] Ada counted from zero to two\.\n$`).MatchString(hist) {
		t.Errorf("HISTORY.md should end with the dated entry:\n%s", hist)
	}
}

// TestAgentReadsBuiltinSkill checks the wiring of the built-in skills: they
// are listed in the prompt at a location read_file opens.
func TestAgentReadsBuiltinSkill(t *testing.T) {
	e := newEnv(t)
	const location = "builtin:skill-creator/SKILL.md"
	e.script.Push(
		fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "call_1", Name: "read_file", Args: `{"path":"` + location + `"}`}}},
		fakellm.Reply{Text: "read it"},
	)
	out, stderr, err := e.run("agent", "-m", "teach yourself a new skill")
	if err != nil || strings.TrimSpace(out) != "read it" {
		t.Fatalf("agent: %v\nstdout: %s\nstderr: %s", err, out, stderr)
	}
	reqs := e.script.Requests()
	if !strings.Contains(reqs[0].System, "<name>skill-creator</name>") || !strings.Contains(reqs[0].System, "<location>"+location+"</location>") {
		t.Errorf("skill-creator is not listed at %s in the system prompt", location)
	}
	res := reqs[1].Messages[len(reqs[1].Messages)-1].ToolResults
	if len(res) != 1 || res[0].IsError || !strings.Contains(res[0].Content, "skills/<name>/SKILL.md") {
		t.Errorf("read_file on the built-in skill: %+v", res)
	}
	if !strings.Contains(reqs[0].System, "### memory") || !strings.Contains(strings.Join(reqs[0].Tools, ","), "spawn") {
		t.Errorf("the memory skill should be always on and spawn offered; tools %v", reqs[0].Tools)
	}
}
