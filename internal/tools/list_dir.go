package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/nanobot-go/nanobot/internal/bytesize"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

// listMaxEntries caps one listing.
const listMaxEntries = 500

// ListDir is the list_dir tool: the entries of one directory.
type ListDir struct {
	ws *workspace.Root
}

// NewListDir returns list_dir working in ws.
func NewListDir(ws *workspace.Root) *ListDir { return &ListDir{ws: ws} }

// ReadOnly: listing changes nothing, so calls may run in parallel.
func (*ListDir) ReadOnly() bool { return true }

func (*ListDir) Spec() llm.ToolSpec {
	return llm.ToolSpec{
		Name: "list_dir",
		Description: fmt.Sprintf("List a directory's entries sorted by name: directories end in \"/\", files show their size, "+
			"symlinks are marked. Not recursive. At most %d entries. Paths are relative to the workspace; "+
			"the default is the workspace itself.", listMaxEntries),
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "Directory to list, relative to the workspace (or absolute). Default \".\"."}
  }
}`),
	}
}

type listDirArgs struct {
	Path string `json:"path"`
}

func (t *ListDir) Run(ctx context.Context, inv Invocation) (Result, error) {
	a, err := DecodeArgs[listDirArgs]("list_dir", inv)
	if err != nil {
		return Result{}, err
	}
	if a.Path == "" {
		a.Path = "."
	}
	where, err := t.ws.Resolve(a.Path)
	if err != nil {
		return Result{}, err
	}
	if fi, err := t.ws.Stat(a.Path); err == nil && !fi.IsDir() {
		return errorResult(fmt.Sprintf("%s is a file, not a directory; use read_file to read it.", a.Path)), nil
	}
	entries, err := t.ws.ReadDir(a.Path)
	if err != nil {
		return Result{}, err
	}
	if len(entries) == 0 {
		return Result{Text: fmt.Sprintf("%s is empty.", a.Path)}, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%d entries):\n", a.Path, len(entries))
	for i, e := range entries {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		if i == listMaxEntries {
			fmt.Fprintf(&b, "... and %d more entries not shown\n", len(entries)-i)
			break
		}
		b.WriteString(t.describe(a.Path, where, e))
		b.WriteByte('\n')
	}
	return Result{Text: strings.TrimSuffix(b.String(), "\n")}, nil
}

// describe renders one entry: "name/", "name  (1.2 KiB)" or
// "name -> (symlink to a directory)".
func (t *ListDir) describe(dir, where string, e fs.DirEntry) string {
	name := e.Name()
	if where == "." && strings.EqualFold(name, workspace.SessionsDir) {
		return name + "/  (chat logs; off limits to tools)"
	}
	if e.Type()&fs.ModeSymlink != 0 {
		fi, err := t.ws.Stat(path.Join(dir, name))
		switch {
		case err != nil:
			return name + "  (symlink; target not accessible)"
		case fi.IsDir():
			return name + "/  (symlink to a directory)"
		default:
			return fmt.Sprintf("%s  (symlink, %s)", name, bytesize.Format(fi.Size()))
		}
	}
	if e.IsDir() {
		return name + "/"
	}
	fi, err := e.Info()
	if err != nil {
		return name
	}
	if !fi.Mode().IsRegular() {
		return fmt.Sprintf("%s  (%s)", name, fi.Mode().Type())
	}
	return fmt.Sprintf("%s  (%s)", name, bytesize.Format(fi.Size()))
}
