// Package nanobot holds what must be embedded from the repository root: the
// workspace template that `nanobot onboard` copies into a new workspace.
// A go:embed pattern cannot reach "..", so the embedding lives here, next to the
// directory, and the rest of the program asks for it through WorkspaceTemplate.
package nanobot

import (
	"embed"
	"io/fs"
)

// The all: prefix keeps files whose names start with "." or "_" too, so a
// dotfile added to the template later is not silently dropped.
//
//go:embed all:workspace-template
var workspaceTemplate embed.FS

// WorkspaceTemplate returns the files of a fresh workspace (AGENTS.md, SOUL.md,
// memory/MEMORY.md, ...), rooted at the template directory so that paths are
// the ones they get inside the workspace.
func WorkspaceTemplate() fs.FS {
	sub, err := fs.Sub(workspaceTemplate, "workspace-template")
	if err != nil {
		// fs.Sub fails only for an invalid path; this one is a constant.
		panic("nanobot: embedded workspace template: " + err.Error())
	}
	return sub
}
