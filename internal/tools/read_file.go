package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/nanobot-go/nanobot/internal/bytesize"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

// Limits of read_file. The character budget stays below the registry's
// output cap so that read_file, not the cap, decides where to stop and can
// say exactly where to continue.
const (
	readDefaultLimit = 2000
	readMaxChars     = 12000
	readMaxLineChars = 2000
	sniffBytes       = 8192
)

// ReadFile is the read_file tool: numbered lines of a text file, paged.
type ReadFile struct {
	ws     *workspace.Root
	mounts []mount
}

// mount serves paths that start with prefix from fsys.
type mount struct {
	prefix string
	fsys   fs.FS
}

// ReadFileOption configures read_file.
type ReadFileOption func(*ReadFile)

// WithMount makes read_file serve paths that start with prefix from fsys
// (the rest of the path is a path in fsys), e.g. "builtin:" for the skills
// embedded in the binary, whose locations the model sees in its prompt.
// Such files are read-only and live outside the workspace, so nothing else
// can reach them.
func WithMount(prefix string, fsys fs.FS) ReadFileOption {
	return func(t *ReadFile) { t.mounts = append(t.mounts, mount{prefix: prefix, fsys: fsys}) }
}

// NewReadFile returns read_file working in ws.
func NewReadFile(ws *workspace.Root, opts ...ReadFileOption) *ReadFile {
	t := &ReadFile{ws: ws}
	for _, o := range opts {
		o(t)
	}
	return t
}

// open opens p in the mount its prefix names, or else in the workspace.
func (t *ReadFile) open(p string) (fs.File, error) {
	for _, m := range t.mounts {
		rest, ok := strings.CutPrefix(p, m.prefix)
		if !ok {
			continue
		}
		rest = strings.TrimPrefix(path.Clean("/"+rest), "/")
		if rest == "" {
			rest = "."
		}
		f, err := m.fsys.Open(rest)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s does not exist", p)
		}
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", p, err)
		}
		return f, nil
	}
	return t.ws.Open(p)
}

// ReadOnly: reading changes nothing, so calls may run in parallel.
func (*ReadFile) ReadOnly() bool { return true }

func (*ReadFile) Spec() llm.ToolSpec {
	return llm.ToolSpec{
		Name: "read_file",
		Description: fmt.Sprintf("Read a text file. Returns numbered lines (\"  12\\tline\"; the number and tab are not part of the file). "+
			"Shows at most %d lines and about %d characters per call; lines longer than %d characters are cut. "+
			"When more follows, the output ends with the offset to continue from. Binary files are described, not shown. "+
			"Paths are relative to the workspace.", readDefaultLimit, readMaxChars, readMaxLineChars),
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File to read, relative to the workspace (or absolute)."},
    "offset": {"type": "integer", "minimum": 1, "description": "First line to show, counting from 1. Default 1."},
    "limit": {"type": "integer", "minimum": 1, "description": "Number of lines to show. Default and maximum ` + fmt.Sprint(readDefaultLimit) + `."}
  },
  "required": ["path"]
}`),
	}
}

type readFileArgs struct {
	Path   string `json:"path"`
	Offset int    `json:"offset"`
	Limit  int    `json:"limit"`
}

func (t *ReadFile) Run(ctx context.Context, inv Invocation) (Result, error) {
	a, err := DecodeArgs[readFileArgs]("read_file", inv)
	if err != nil {
		return Result{}, err
	}
	a.Offset = max(a.Offset, 1)
	if a.Limit <= 0 || a.Limit > readDefaultLimit {
		a.Limit = readDefaultLimit
	}
	f, err := t.open(a.Path)
	if err != nil {
		return Result{}, err
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return Result{}, err
	}
	if fi.IsDir() {
		return errorResult(fmt.Sprintf("%s is a directory; use list_dir to see what it holds.", a.Path)), nil
	}
	br := bufio.NewReaderSize(f, sniffBytes)
	head, err := br.Peek(sniffBytes)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return Result{}, fmt.Errorf("read %s: %w", a.Path, err)
	}
	if isBinary(head) {
		return Result{Text: fmt.Sprintf("%s is a binary file (%s, %s); read_file shows text only. "+
			"Inspect it with exec (for example `file` or `xxd | head`).",
			a.Path, http.DetectContentType(head), bytesize.Format(fi.Size()))}, nil
	}
	return readLines(ctx, br, a)
}

// readLines writes lines offset..offset+limit-1 numbered, within the
// character budget, and a footer saying where to continue.
func readLines(ctx context.Context, br *bufio.Reader, a readFileArgs) (Result, error) {
	var out strings.Builder
	lineNo, shown, budget := 0, 0, readMaxChars
	more := false
	for {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		line, cut, err := readLine(br, readMaxLineChars)
		if errors.Is(err, io.EOF) && line == "" && !cut {
			break
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return Result{}, fmt.Errorf("read %s: %w", a.Path, err)
		}
		lineNo++
		if lineNo < a.Offset {
			continue
		}
		if shown == a.Limit {
			more = true
			break
		}
		if cut {
			line += fmt.Sprintf(" [... line cut at %d characters]", readMaxLineChars)
		}
		entry := fmt.Sprintf("%6d\t%s\n", lineNo, line)
		if shown > 0 && utf8.RuneCountInString(entry) > budget {
			more = true
			break
		}
		out.WriteString(entry)
		budget -= utf8.RuneCountInString(entry)
		shown++
		if errors.Is(err, io.EOF) {
			break
		}
	}
	switch {
	case lineNo == 0:
		return Result{Text: fmt.Sprintf("%s is empty.", a.Path)}, nil
	case shown == 0:
		return errorResult(fmt.Sprintf("%s has %d lines; offset %d is past the end.", a.Path, lineNo, a.Offset)), nil
	case more:
		last := a.Offset + shown - 1
		fmt.Fprintf(&out, "[lines %d-%d shown; more follow: call read_file with offset=%d]", a.Offset, last, last+1)
	default:
		fmt.Fprintf(&out, "[end of file: %d lines]", lineNo)
	}
	return Result{Text: out.String()}, nil
}

// readLine reads one line without its line ending, keeping at most max
// characters of it (cut reports that more was dropped). Memory stays bounded
// even for a file that is one enormous line.
func readLine(br *bufio.Reader, max int) (line string, cut bool, err error) {
	var buf []byte
	limit := max * utf8.UTFMax
	for {
		chunk, isPrefix, rerr := br.ReadLine()
		if len(buf) < limit {
			buf = append(buf, chunk[:min(len(chunk), limit-len(buf))]...)
		}
		if len(buf) >= limit && isPrefix {
			cut = true
		}
		if rerr != nil {
			if len(buf) == 0 && !cut {
				return "", false, rerr
			}
			err = rerr
			break
		}
		if !isPrefix {
			break
		}
	}
	s := strings.ToValidUTF8(string(buf), "\uFFFD")
	if utf8.RuneCountInString(s) > max {
		s = s[:runeOffset(s, max)]
		cut = true
	}
	return s, cut, err
}

// isBinary guesses from a file's first bytes: a NUL byte or text that is not
// UTF-8 (allowing a character cut at the end of the sample).
func isBinary(head []byte) bool {
	if bytes.IndexByte(head, 0) >= 0 {
		return true
	}
	for i := 0; i < len(head); {
		r, size := utf8.DecodeRune(head[i:])
		if r == utf8.RuneError && size == 1 {
			return len(head)-i >= utf8.UTFMax
		}
		i += size
	}
	return false
}
