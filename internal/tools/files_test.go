package tools

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadFile(t *testing.T) {
	manyLines := strings.Repeat(strings.Repeat("x", 99)+"\n", 1000)
	ws, dir := testWorkspace(t, true, map[string]string{
		"abc.txt":   "a\nb\nc\n",
		"five.txt":  "1\n2\n3\n4\n5",
		"crlf.txt":  "one\r\ntwo\r\n",
		"empty.txt": "",
		"long.txt":  strings.Repeat("y", 5000) + "\nshort\n",
		"many.txt":  manyLines,
		"image.png": "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
		"latin.txt": "caf\xe9 ol\xe9 " + strings.Repeat("z", 20),
		"sub/x.txt": "x",
	})
	if err := os.WriteFile(filepath.Join(dir, "huge.txt"), []byte(strings.Repeat("h", 10<<20)), 0o600); err != nil {
		t.Fatal(err)
	}
	tool := NewReadFile(ws)
	cases := []struct {
		name    string
		args    args
		isError bool
		want    []string
	}{
		{"whole file", args{"path": "abc.txt"}, false, []string{"     1\ta\n     2\tb\n     3\tc\n[end of file: 3 lines]"}},
		{"no trailing newline", args{"path": "five.txt"}, false, []string{"     5\t5\n[end of file: 5 lines]"}},
		{"page", args{"path": "five.txt", "offset": 2, "limit": 2}, false, []string{"     2\t2\n     3\t3\n[lines 2-3 shown; more follow: call read_file with offset=4]"}},
		{"string offset cast", args{"path": "five.txt", "offset": "5"}, false, []string{"     5\t5\n[end of file"}},
		{"last page exactly", args{"path": "five.txt", "offset": 4, "limit": 2}, false, []string{"[end of file: 5 lines]"}},
		{"offset past end", args{"path": "abc.txt", "offset": 10}, true, []string{"abc.txt has 3 lines; offset 10 is past the end"}},
		{"offset zero", args{"path": "abc.txt", "offset": 0}, true, []string{`argument "offset": minimum`}},
		{"crlf", args{"path": "crlf.txt"}, false, []string{"     1\tone\n     2\ttwo\n"}},
		{"empty", args{"path": "empty.txt"}, false, []string{"empty.txt is empty."}},
		{"long line cut", args{"path": "long.txt"}, false, []string{"[... line cut at 2000 characters]\n     2\tshort"}},
		{"budget", args{"path": "many.txt"}, false, []string{"[lines 1-112 shown; more follow: call read_file with offset=113]"}},
		{"huge single line", args{"path": "huge.txt"}, false, []string{"line cut at 2000", "[end of file: 1 lines]"}},
		{"binary", args{"path": "image.png"}, false, []string{"image.png is a binary file (image/png, 16 B)"}},
		{"not utf-8", args{"path": "latin.txt"}, false, []string{"binary file"}},
		{"directory", args{"path": "sub"}, true, []string{"sub is a directory; use list_dir"}},
		{"missing", args{"path": "nope.txt"}, true, []string{"no such file or directory: nope.txt"}},
		{"missing path", args{}, true, []string{`missing required argument "path"`}},
		{"sessions", args{"path": "sessions/telegram_42.jsonl"}, true, []string{"sessions/ holds the chat logs and is off limits"}},
		{"outside", args{"path": "/etc/hostname"}, true, []string{"path escapes the workspace: /etc/hostname"}},
		{"dotdot", args{"path": "../x"}, true, []string{"path escapes the workspace: ../x"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			check(t, runTool(t, tool, c.args), c.isError, c.want...)
		})
	}
}

func TestWriteFile(t *testing.T) {
	ws, dir := testWorkspace(t, true, map[string]string{"old.txt": "old", "sub/keep.txt": "k"})
	tool := NewWriteFile(ws)
	check(t, runTool(t, tool, args{"path": "a/b/new.txt", "content": "hello"}), false, "Created a/b/new.txt (5 bytes).")
	if got := readWS(t, dir, "a/b/new.txt"); got != "hello" {
		t.Fatalf("content %q", got)
	}
	if fi, err := os.Stat(filepath.Join(dir, "a", "b")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("created dir: %v %v", fi.Mode(), err)
	}
	check(t, runTool(t, tool, args{"path": "old.txt", "content": ""}), false, "Replaced old.txt (0 bytes).")
	if got := readWS(t, dir, "old.txt"); got != "" {
		t.Fatalf("content %q", got)
	}
	for _, c := range []struct {
		name string
		args args
		want string
	}{
		{"sessions", args{"path": "sessions/telegram_42.jsonl", "content": "x"}, "off limits"},
		{"sessions new", args{"path": "Sessions/evil.jsonl", "content": "x"}, "off limits"},
		{"outside", args{"path": "../escape.txt", "content": "x"}, "path escapes the workspace"},
		{"directory", args{"path": "sub", "content": "x"}, "is a directory"},
		{"no content", args{"path": "x.txt"}, `missing required argument "content"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			check(t, runTool(t, tool, c.args), true, c.want)
		})
	}
	if got := readWS(t, dir, "sessions/telegram_42.jsonl"); got != `{"role":"user"}`+"\n" {
		t.Fatalf("session log changed: %q", got)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escape.txt")); !os.IsNotExist(err) {
		t.Fatalf("file written outside: %v", err)
	}
}

func TestEditFile(t *testing.T) {
	const notes = "# Notes\n\nfunc main() {\n\tfmt.Println(\"hello\")\n}\n\n- buy milk\n- buy eggs\n- buy milk\n"
	files := map[string]string{
		"notes.md": notes,
		"crlf.txt": "alpha\r\nbeta\r\ngamma\r\n",
		"bin.dat":  "ab\x00cd",
	}
	cases := []struct {
		name    string
		args    args
		isError bool
		want    []string
		after   string // expected content of the file after the call
	}{
		{"replace once", args{"path": "notes.md", "old_text": "buy eggs", "new_text": "buy bread"}, false,
			[]string{"Edited notes.md at line 8: replaced 1 lines with 1."}, strings.Replace(notes, "buy eggs", "buy bread", 1)},
		{"delete", args{"path": "notes.md", "old_text": "# Notes\n\n", "new_text": ""}, false,
			[]string{"replaced 2 lines with 0"}, strings.TrimPrefix(notes, "# Notes\n\n")},
		{"multiple matches", args{"path": "notes.md", "old_text": "buy milk", "new_text": "x"}, true,
			[]string{"old_text occurs 2 times in notes.md (at lines 7, 9)", "Include more of the surrounding text"}, notes},
		{"typo shows closest", args{"path": "notes.md", "old_text": "func main() {\n\tfmt.Println(\"helo\")\n}", "new_text": "x"}, true,
			[]string{"old_text was not found in notes.md. The most similar region is lines 3-5 (",
				"----- lines 3-5 -----\nfunc main() {\n\tfmt.Println(\"hello\")\n}\n-----"}, notes},
		{"whitespace only", args{"path": "notes.md", "old_text": "func main() {\n    fmt.Println(\"hello\")\n}", "new_text": "x"}, true,
			[]string{"lines 3-5", "differs only in whitespace or indentation"}, notes},
		{"nothing similar", args{"path": "notes.md", "old_text": "zzzz qqqq", "new_text": "x"}, true,
			[]string{"nothing in the file resembles it"}, notes},
		{"crlf file", args{"path": "crlf.txt", "old_text": "beta\ngamma", "new_text": "BETA\nGAMMA"}, false,
			[]string{"Edited crlf.txt at line 2"}, "alpha\r\nBETA\r\nGAMMA\r\n"},
		{"empty old_text", args{"path": "notes.md", "old_text": "", "new_text": "x"}, true, []string{"use write_file"}, notes},
		{"identical", args{"path": "notes.md", "old_text": "x", "new_text": "x"}, true, []string{"identical"}, notes},
		{"binary", args{"path": "bin.dat", "old_text": "ab", "new_text": "x"}, true, []string{"binary file"}, ""},
		{"missing file", args{"path": "nope.md", "old_text": "a", "new_text": "b"}, true, []string{"no such file"}, ""},
		{"sessions", args{"path": "sessions/telegram_42.jsonl", "old_text": "user", "new_text": "x"}, true, []string{"off limits"}, ""},
		{"missing new_text", args{"path": "notes.md", "old_text": "a"}, true, []string{`missing required argument "new_text"`}, notes},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := make(map[string]string, len(files))
			for k, v := range files {
				fs[k] = v
			}
			ws, dir := testWorkspace(t, true, fs)
			check(t, runTool(t, NewEditFile(ws), c.args), c.isError, c.want...)
			if c.after != "" {
				if got := readWS(t, dir, c.args["path"].(string)); got != c.after {
					t.Fatalf("file after edit:\n%q\nwant:\n%q", got, c.after)
				}
			}
		})
	}
}

func TestClosestRegion(t *testing.T) {
	var b strings.Builder
	for i := 1; i <= 2000; i++ {
		fmt.Fprintf(&b, "line %d: the quick brown fox number %d jumps\n", i, i*7)
	}
	content := b.String()
	old := "line 1500: the quick brown fox number 10500 jumps\nline 1501: the quick brown fax number 10507 jumps"
	m := closestRegion(content, old)
	if m.first != 1500 || m.last != 1501 || m.score < 0.9 {
		t.Fatalf("closest = lines %d-%d (%.2f), want 1500-1501 above 0.9", m.first, m.last, m.score)
	}
	// old longer than the file: the whole file is the region.
	m = closestRegion("a\nb\n", "a\nb\nc\nd")
	if m.first != 1 || m.last != 2 || m.text != "a\nb" {
		t.Fatalf("short file: %+v", m)
	}
}

func TestListDir(t *testing.T) {
	ws, dir := testWorkspace(t, true, map[string]string{
		"b.txt":             "12345",
		"a/inner.md":        "x",
		"memory/MEM.md":     "m",
		"empty/.keep":       "",
		"many/.placeholder": "",
	})
	if err := os.Remove(filepath.Join(dir, "empty", ".keep")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a", filepath.Join(dir, "link_a")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/hostname", filepath.Join(dir, "link_out")); err != nil {
		t.Fatal(err)
	}
	for i := range 600 {
		if err := os.WriteFile(filepath.Join(dir, "many", fmt.Sprintf("f%03d", i)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tool := NewListDir(ws)
	check(t, runTool(t, tool, args{}), false, ". (8 entries):\na/\nb.txt  (5 B)\nempty/\nlink_a/  (symlink to a directory)\n"+
		"link_out  (symlink; target not accessible)\nmany/\nmemory/\nsessions/  (chat logs; off limits to tools)")
	check(t, runTool(t, tool, args{"path": "a"}), false, "a (1 entries):\ninner.md  (1 B)")
	check(t, runTool(t, tool, args{"path": "empty"}), false, "empty is empty.")
	check(t, runTool(t, tool, args{"path": "many"}), false, "many (601 entries):\n.placeholder", "f498  (0 B)\n... and 101 more entries not shown")
	check(t, runTool(t, tool, args{"path": "b.txt"}), true, "b.txt is a file, not a directory")
	check(t, runTool(t, tool, args{"path": "sessions"}), true, "off limits")
	check(t, runTool(t, tool, args{"path": "/"}), true, "path escapes the workspace: /")
	check(t, runTool(t, tool, args{"path": "nope"}), true, "no such file or directory: nope")
}

func TestReadOnlyTools(t *testing.T) {
	ws, _ := testWorkspace(t, true, map[string]string{})
	for _, c := range []struct {
		tool Tool
		ro   bool
	}{
		{NewReadFile(ws), true}, {NewListDir(ws), true}, {NewWriteFile(ws), false}, {NewEditFile(ws), false},
	} {
		if IsReadOnly(c.tool) != c.ro {
			t.Errorf("%s: read-only = %v, want %v", c.tool.Spec().Name, !c.ro, c.ro)
		}
	}
}
