package nanobot_test

import (
	"bufio"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The code and docs once cited requirement ids of a specification that is not
// in the repository, which no reader could follow. scripts/spec-refs.py
// replaced them with doc sections; these tests keep it that way.

// specID is the shape of those ids ("S-", capitals, a number), and of the
// specification named without one (its file name, or a section sign).
var specID = regexp.MustCompile(`\bS-[A-Z]+[0-9]+[a-z]?\b|\bSPEC(?:\.md| §)`)

// TestNoSpecIDs fails when a requirement id reappears in a .go or .md file.
// Cite a doc section (a heading of a page under docs/) or a package; running
// `python3 scripts/spec-refs.py` rewrites the known ids.
func TestNoSpecIDs(t *testing.T) {
	for _, name := range repoFiles(t, ".go", ".md") {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(strings.NewReader(string(data)))
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			if id := specID.FindString(sc.Text()); id != "" {
				t.Errorf("%s:%d: %s cites the unpublished specification; name a doc section instead (scripts/spec-refs.py)", name, n, id)
			}
		}
	}
}

// docRef is a reference to a doc page, with the heading anchor if any, as Go
// comments write it: docs/tools.md#sandbox, README.md#commands.
var docRef = regexp.MustCompile(`(?:^|[^\w./-])((?:docs/[\w.-]+|README|SECURITY)\.md)(#[\w-]+)?`)

// TestDocRefsInGoComments: every docs/*.md (and README.md) a Go comment
// points to exists, and so does the heading its #anchor names, as GitHub
// renders anchors. A renamed doc or heading then fails here instead of
// leaving readers a dead reference.
func TestDocRefsInGoComments(t *testing.T) {
	anchors := map[string]map[string]bool{}
	checked := 0
	for _, name := range repoFiles(t, ".go") {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		fset := token.NewFileSet()
		file := fset.AddFile(name, -1, len(src))
		var s scanner.Scanner
		s.Init(file, src, nil, scanner.ScanComments)
		for {
			pos, tok, lit := s.Scan()
			if tok == token.EOF {
				break
			}
			if tok != token.COMMENT {
				continue
			}
			for _, m := range docRef.FindAllStringSubmatch(lit, -1) {
				doc, anchor := m[1], strings.TrimPrefix(m[2], "#")
				checked++
				at := fset.Position(pos)
				if _, ok := anchors[doc]; !ok {
					anchors[doc] = headingAnchors(doc)
				}
				switch {
				case anchors[doc] == nil:
					t.Errorf("%s:%d: %s does not exist", at.Filename, at.Line, doc)
				case anchor != "" && !anchors[doc][anchor]:
					t.Errorf("%s:%d: %s has no heading #%s", at.Filename, at.Line, doc, anchor)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no doc references found in Go comments: the scan is broken")
	}
}

// TestDocLinksResolve: the relative links between the Markdown pages (README,
// SECURITY, docs/) point to files that exist and, with an anchor, to a
// heading that exists.
func TestDocLinksResolve(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	anchors := map[string]map[string]bool{}
	for _, name := range repoFiles(t, ".md") {
		if name != "README.md" && name != "SECURITY.md" && !strings.HasPrefix(name, "docs/") {
			continue
		}
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(data), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			if file == "" {
				file = name
			} else {
				file = path.Clean(path.Join(path.Dir(name), file))
			}
			if _, err := os.Stat(file); err != nil {
				t.Errorf("%s: link %s: %s does not exist", name, target, file)
				continue
			}
			if anchor == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			if _, ok := anchors[file]; !ok {
				anchors[file] = headingAnchors(file)
			}
			if !anchors[file][anchor] {
				t.Errorf("%s: link %s: %s has no heading #%s", name, target, file, anchor)
			}
		}
	}
}

// headingAnchors returns the anchors GitHub gives the headings of a Markdown
// file (nil when it cannot be read): the heading's text in lower case, without
// punctuation other than '-' and '_', spaces turned into '-', and "-1", "-2"
// added to repeats.
func headingAnchors(name string) map[string]bool {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil
	}
	mdLink := regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	out := map[string]bool{}
	fence := false
	for line := range strings.Lines(string(data)) {
		line = strings.TrimRight(line, "\r\n")
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		text, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if fence || !ok || !strings.HasPrefix(line, "#") || len(line)-len(strings.TrimLeft(line, "#")) > 6 {
			continue
		}
		text = mdLink.ReplaceAllString(strings.TrimSpace(text), "$1")
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		for i, base := 1, a; out[a]; i++ {
			a = base + "-" + strconv.Itoa(i)
		}
		out[a] = true
	}
	return out
}

// repoFiles lists the repository's files with one of the extensions, as
// slash paths relative to the root, skipping hidden directories.
func repoFiles(t *testing.T, exts ...string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != "." && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		for _, ext := range exts {
			if strings.HasSuffix(p, ext) {
				out = append(out, filepath.ToSlash(p))
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
