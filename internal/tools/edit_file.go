package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

// editMaxBytes bounds the files edit_file loads whole.
const editMaxBytes = 8 << 20

// EditFile is the edit_file tool: replace one exact piece of text.
type EditFile struct {
	ws *workspace.Root
}

// NewEditFile returns edit_file working in ws.
func NewEditFile(ws *workspace.Root) *EditFile { return &EditFile{ws: ws} }

func (*EditFile) Spec() llm.ToolSpec {
	return llm.ToolSpec{
		Name: "edit_file",
		Description: "Replace old_text with new_text in a file. old_text must occur exactly once and match character for " +
			"character, including whitespace and indentation (copy it from read_file output, without the line numbers). " +
			"If it is not found, the error shows the most similar region; if it occurs several times, add surrounding " +
			"lines to make it unique. new_text may be empty to delete. Files up to 8 MiB. Paths are relative to the workspace.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File to edit, relative to the workspace (or absolute)."},
    "old_text": {"type": "string", "description": "Exact text to replace; must occur exactly once."},
    "new_text": {"type": "string", "description": "Replacement text."}
  },
  "required": ["path", "old_text", "new_text"]
}`),
	}
}

type editFileArgs struct {
	Path    string `json:"path"`
	OldText string `json:"old_text"`
	NewText string `json:"new_text"`
}

func (t *EditFile) Run(ctx context.Context, inv Invocation) (Result, error) {
	a, err := DecodeArgs[editFileArgs]("edit_file", inv)
	if err != nil {
		return Result{}, err
	}
	if a.OldText == "" {
		return errorResult("old_text is empty. To create or overwrite a whole file use write_file."), nil
	}
	if a.OldText == a.NewText {
		return errorResult("old_text and new_text are identical; nothing to change."), nil
	}
	// MEMORY.md and the bootstrap files are also rewritten by
	// consolidations and the web panel, in this process or another one
	// sharing the workspace; their lock makes this read and the write one
	// step with respect to them, so neither update replaces the other.
	release, err := t.ws.Guard(a.Path)
	if err != nil {
		return Result{}, err
	}
	defer release()
	data, err := t.ws.ReadFile(a.Path, editMaxBytes)
	if err != nil {
		return Result{}, err
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return errorResult(fmt.Sprintf("%s is a binary file; edit_file changes text files only.", a.Path)), nil
	}
	content := string(data)
	oldText, newText := a.OldText, a.NewText
	n := strings.Count(content, oldText)
	if n == 0 && strings.Contains(content, "\r\n") && !strings.Contains(oldText, "\r") {
		// The file has Windows line endings and the model wrote "\n".
		crlf := strings.ReplaceAll(oldText, "\n", "\r\n")
		if c := strings.Count(content, crlf); c > 0 {
			oldText, newText, n = crlf, strings.ReplaceAll(newText, "\n", "\r\n"), c
		}
	}
	switch {
	case n == 0:
		return errorResult(notFound(a.Path, content, a.OldText)), nil
	case n > 1:
		return errorResult(fmt.Sprintf("old_text occurs %d times in %s (at lines %s). "+
			"Include more of the surrounding text so that it matches exactly once.",
			n, a.Path, matchLines(content, oldText, 10))), nil
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	updated := strings.Replace(content, oldText, newText, 1)
	if err := t.ws.WriteFileAtomic(a.Path, []byte(updated), 0o600); err != nil {
		return Result{}, err
	}
	line := strings.Count(content[:strings.Index(content, oldText)], "\n") + 1
	return Result{Text: fmt.Sprintf("Edited %s at line %d: replaced %d lines with %d.",
		a.Path, line, lineCount(oldText), lineCount(newText))}, nil
}

// matchLines lists the line numbers where sub starts in s, at most max.
func matchLines(s, sub string, max int) string {
	var lines []string
	off := 0
	for len(lines) < max {
		i := strings.Index(s[off:], sub)
		if i < 0 {
			break
		}
		lines = append(lines, fmt.Sprint(strings.Count(s[:off+i], "\n")+1))
		off += i + len(sub)
	}
	return strings.Join(lines, ", ")
}

func lineCount(s string) int {
	if s == "" {
		return 0
	}
	return strings.Count(strings.TrimSuffix(s, "\n"), "\n") + 1
}

// notFound explains a miss and shows the region of content most similar to
// old, so the model can copy the exact text.
func notFound(path, content, old string) string {
	m := closestRegion(content, old)
	if m.score < 0.3 {
		return fmt.Sprintf("old_text was not found in %s, and nothing in the file resembles it. "+
			"Read the file with read_file and copy the exact text.", path)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "old_text was not found in %s. The most similar region is lines %d-%d (%.0f%% similar)",
		path, m.first, m.last, m.score*100)
	if collapseSpace(m.text) == collapseSpace(old) {
		b.WriteString("; it differs only in whitespace or indentation")
	}
	b.WriteString(". Its exact text:\n")
	fmt.Fprintf(&b, "----- lines %d-%d -----\n%s\n-----\n", m.first, m.last, clip(m.text, 4000))
	b.WriteString("Copy the text to change from there into old_text exactly.")
	return b.String()
}

func collapseSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

// region is a run of whole lines of a file.
type region struct {
	first, last int // 1-based, inclusive
	text        string
	score       float64
}

// closestRegion finds the window of as many lines as old has that is most
// similar to old. Similarity is the Dice coefficient of the two texts'
// character-bigram multisets: 1 for equal text, high for text that differs
// in whitespace, a typo or a changed word. The window slides over the file
// updating the bigram counts incrementally, so the search costs time
// proportional to the file's size, whatever the length of old.
func closestRegion(content, old string) region {
	lines := strings.SplitAfter(content, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) == 0 {
		return region{}
	}
	n := min(lineCount(old), len(lines))
	// Only bigrams that occur in old can be in common; give them small
	// indexes so the sliding window updates slices, not maps.
	index := map[uint64]int{}
	var want []int
	forBigrams(old, func(bg uint64) {
		i, ok := index[bg]
		if !ok {
			i = len(want)
			index[bg] = i
			want = append(want, 0)
		}
		want[i]++
	})
	wantTotal := 0
	for _, c := range want {
		wantTotal += c
	}
	have := make([]int, len(want))
	haveTotal, common := 0, 0
	add := func(line string, delta int) {
		forBigrams(line, func(bg uint64) {
			haveTotal += delta
			i, ok := index[bg]
			if !ok {
				return
			}
			if delta > 0 {
				if have[i] < want[i] {
					common++
				}
				have[i]++
			} else {
				have[i]--
				if have[i] < want[i] {
					common--
				}
			}
		})
	}
	score := func() float64 {
		if wantTotal+haveTotal == 0 {
			return 0
		}
		return 2 * float64(common) / float64(wantTotal+haveTotal)
	}
	for i := range n {
		add(lines[i], 1)
	}
	best := region{first: 1, last: n, score: score()}
	for start := 1; start+n <= len(lines); start++ {
		add(lines[start-1], -1)
		add(lines[start+n-1], 1)
		if s := score(); s > best.score {
			best = region{first: start + 1, last: start + n, score: s}
		}
	}
	best.text = strings.TrimSuffix(strings.Join(lines[best.first-1:best.last], ""), "\n")
	return best
}

// forBigrams calls f for each pair of adjacent characters in each line of
// s, counting the line's start and end as characters of their own, so that
// short lines ("}", "") still count. Pairs never span two lines, so a
// window's bigrams are the sum of its lines'.
func forBigrams(s string, f func(uint64)) {
	const lineStart, lineEnd = -1, -2
	prev := rune(lineStart)
	for _, r := range s {
		if r == '\n' {
			f(pair(prev, lineEnd))
			prev = lineStart
			continue
		}
		f(pair(prev, r))
		prev = r
	}
	if prev != lineStart {
		f(pair(prev, lineEnd))
	}
}

// pair packs two characters into one map key.
func pair(a, b rune) uint64 {
	return uint64(uint32(a))<<32 | uint64(uint32(b))
}
