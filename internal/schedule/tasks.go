package schedule

import (
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/text"
)

// activeHeading is the heading whose list items are the heartbeat's tasks.
const activeHeading = "active tasks"

// ActiveTasks returns the tasks of a HEARTBEAT.md: the list items ("- ",
// "* ", "1. ") under the level-2 heading "## Active tasks", up to the next
// heading. Everything else is ignored: other headings' lists, paragraphs,
// HTML comments, code blocks, empty items. The file is parsed as CommonMark,
// so a list item inside a comment or a code block is not a task. A task is
// the item's text as written, nested items included.
func ActiveTasks(src []byte) []string {
	doc := goldmark.DefaultParser().Parse(text.NewReader(src))
	var tasks []string
	active := false
	for n := doc.FirstChild(); n != nil; n = n.NextSibling() {
		switch n := n.(type) {
		case *ast.Heading:
			active = n.Level == 2 && strings.EqualFold(strings.TrimSpace(linesText(n, src)), activeHeading)
		case *ast.List:
			if !active {
				continue
			}
			for item := n.FirstChild(); item != nil; item = item.NextSibling() {
				if t := itemText(item, src); t != "" {
					tasks = append(tasks, t)
				}
			}
		}
	}
	return tasks
}

// itemText is the source of a list item from its first line to its last,
// with inner lines' indentation folded into single spaces.
func itemText(item ast.Node, src []byte) string {
	start, stop := -1, -1
	_ = ast.Walk(item, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering || n.Type() != ast.TypeBlock {
			return ast.WalkContinue, nil
		}
		lines := n.Lines()
		for i := range lines.Len() {
			seg := lines.At(i)
			if start < 0 || seg.Start < start {
				start = seg.Start
			}
			if seg.Stop > stop {
				stop = seg.Stop
			}
		}
		return ast.WalkContinue, nil
	})
	if start < 0 {
		return ""
	}
	return strings.Join(strings.Fields(string(src[start:stop])), " ")
}

// linesText is the text of a block's own lines (a heading's content).
func linesText(n ast.Node, src []byte) string {
	var b strings.Builder
	lines := n.Lines()
	for i := range lines.Len() {
		seg := lines.At(i)
		b.Write(seg.Value(src))
	}
	return b.String()
}
