package nanobot

import (
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestWorkspaceTemplate(t *testing.T) {
	tmpl := WorkspaceTemplate()
	var files []string
	err := fs.WalkDir(tmpl, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"AGENTS.md", "SOUL.md", "USER.md", "TOOLS.md", "HEARTBEAT.md",
		"memory/MEMORY.md", "memory/HISTORY.md", "skills/README.md",
	} {
		if !slices.Contains(files, want) {
			t.Errorf("template lacks %s (has %v)", want, files)
		}
	}
}

// A fresh workspace must not wake the model every heartbeat: the template's
// "## Active tasks" section holds no list items, only a comment.
func TestHeartbeatTemplateHasNoActiveTasks(t *testing.T) {
	data, err := fs.ReadFile(WorkspaceTemplate(), "HEARTBEAT.md")
	if err != nil {
		t.Fatal(err)
	}
	listItem := regexp.MustCompile(`^\s*(?:[-*+]|\d+[.)])\s+\S`)
	in, found := false, false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "#") {
			in = strings.EqualFold(strings.TrimSpace(line), "## Active tasks")
			found = found || in
			continue
		}
		if in && listItem.MatchString(line) {
			t.Errorf("active task in the template: %q", line)
		}
	}
	if !found {
		t.Fatal(`HEARTBEAT.md has no "## Active tasks" heading`)
	}
}
