package schedule

import (
	"io/fs"
	"slices"
	"strings"
	"testing"

	nanobot "github.com/nanobot-go/nanobot"
)

func TestActiveTasks(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"empty file", "", nil},
		{"heading only", "## Active tasks\n", nil},
		{"dash star and number items", "## Active tasks\n\n- one\n* two\n1. three\n",
			[]string{"one", "two", "three"}},
		{"up to the next heading", "## Active tasks\n- due\n## Done\n- finished\n", []string{"due"}},
		{"a sub-heading ends the section too", "## Active tasks\n- due\n### Notes\n- not a task\n", []string{"due"}},
		{"other sections ignored", "# Heartbeat\n- intro item\n## Ideas\n- later\n", nil},
		{"heading match ignores case and spaces", "##   active TASKS  \n- x\n", []string{"x"}},
		{"level 1 heading is not the section", "# Active tasks\n- x\n", nil},
		{"html comment ignored", "## Active tasks\n<!--\n- commented out\n-->\n", nil},
		{"code block ignored", "## Active tasks\n```\n- in code\n```\n    - indented code\n", nil},
		{"paragraph ignored", "## Active tasks\nJust a note, not a list.\n", nil},
		{"empty item ignored", "## Active tasks\n-\n- real\n", []string{"real"}},
		{"multi-line and nested item is one task", "## Active tasks\n- Each morning:\n  check notes/todo.md\n  - and the inbox\n",
			[]string{"Each morning: check notes/todo.md - and the inbox"}},
		{"second active section counts", "## Active tasks\n- a\n## Done\n- b\n## Active tasks\n- c\n", []string{"a", "c"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ActiveTasks([]byte(tc.src)); !slices.Equal(got, tc.want) {
				t.Errorf("ActiveTasks = %q, want %q", got, tc.want)
			}
		})
	}
}

// The template a new workspace gets has examples in its prose and comments
// but no active task, so a fresh install never calls the model.
func TestTemplateHasNoActiveTasks(t *testing.T) {
	src, err := fs.ReadFile(nanobot.WorkspaceTemplate(), "HEARTBEAT.md")
	if err != nil {
		t.Fatal(err)
	}
	if got := ActiveTasks(src); len(got) != 0 {
		t.Errorf("template has active tasks %q", got)
	}
	// The user adds a task under the comment, as the template says.
	withTask := []byte(strings.Replace(string(src), "## Done", "- Check notes/todo.md each morning.\n\n## Done", 1))
	if got := ActiveTasks(withTask); !slices.Equal(got, []string{"Check notes/todo.md each morning."}) {
		t.Errorf("template plus one task: %q", got)
	}
}
