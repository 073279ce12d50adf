package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

// WriteFile is the write_file tool: create or replace a whole file.
type WriteFile struct {
	ws *workspace.Root
}

// NewWriteFile returns write_file working in ws.
func NewWriteFile(ws *workspace.Root) *WriteFile { return &WriteFile{ws: ws} }

func (*WriteFile) Spec() llm.ToolSpec {
	return llm.ToolSpec{
		Name: "write_file",
		Description: "Create a file or replace its whole content. Missing parent directories are created. " +
			"The write is atomic: the file never holds half the content. To change part of a file use edit_file. " +
			"Paths are relative to the workspace.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File to write, relative to the workspace (or absolute)."},
    "content": {"type": "string", "description": "The complete new content of the file."}
  },
  "required": ["path", "content"]
}`),
	}
}

type writeFileArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

func (t *WriteFile) Run(ctx context.Context, inv Invocation) (Result, error) {
	a, err := DecodeArgs[writeFileArgs]("write_file", inv)
	if err != nil {
		return Result{}, err
	}
	where, err := t.ws.Resolve(a.Path)
	if err != nil {
		return Result{}, err
	}
	existed := true
	if _, err := t.ws.Stat(a.Path); errors.Is(err, fs.ErrNotExist) {
		existed = false
	}
	if dir := filepath.Dir(where); dir != "." {
		if err := t.ws.MkdirAll(dir, 0o700); err != nil {
			return Result{}, err
		}
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	// A consolidation or the web panel checks MEMORY.md (or a bootstrap
	// file) and then replaces it under the file's lock; writing under it
	// too means they see this write in their check instead of replacing it.
	release, err := t.ws.Guard(a.Path)
	if err != nil {
		return Result{}, err
	}
	defer release()
	if err := t.ws.WriteFileAtomic(a.Path, []byte(a.Content), 0o600); err != nil {
		return Result{}, err
	}
	verb := "Created"
	if existed {
		verb = "Replaced"
	}
	return Result{Text: fmt.Sprintf("%s %s (%d bytes).", verb, a.Path, len(a.Content))}, nil
}
