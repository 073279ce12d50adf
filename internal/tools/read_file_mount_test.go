package tools

import (
	"testing"
	"testing/fstest"
)

func TestReadFileMount(t *testing.T) {
	ws, _ := testWorkspace(t, true, map[string]string{"builtin:x": "workspace file named like a mount", "notes.md": "buy milk"})
	builtin := fstest.MapFS{
		"github/SKILL.md": {Data: []byte("---\nname: github\n---\nUse gh.\n")},
	}
	tool := NewReadFile(ws, WithMount("builtin:", builtin))
	tests := []struct {
		name    string
		path    string
		isError bool
		want    []string
	}{
		{"a built-in file", "builtin:github/SKILL.md", false, []string{"     4\tUse gh.", "[end of file: 4 lines]"}},
		{"dot segments stay inside the mount", "builtin:../github/./SKILL.md", false, []string{"Use gh."}},
		{"missing built-in file", "builtin:nope/SKILL.md", true, []string{"builtin:nope/SKILL.md does not exist"}},
		{"a directory of the mount", "builtin:github", true, []string{"is a directory"}},
		{"workspace paths still work", "notes.md", false, []string{"buy milk"}},
		{"the mount hides a workspace file with its prefix", "builtin:x", true, []string{"builtin:x does not exist"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check(t, runTool(t, tool, args{"path": tt.path}), tt.isError, tt.want...)
		})
	}
	// Without the mount the prefix is an ordinary file name in the workspace.
	check(t, runTool(t, NewReadFile(ws), args{"path": "builtin:x"}), false, "workspace file named like a mount")
}
