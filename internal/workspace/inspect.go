package workspace

import (
	"errors"
	"io/fs"
	"path"
	"strings"
)

// Finding is a workspace file the daemon refuses or leaves out, as doctor
// reports it.
type Finding struct {
	Path    string
	Problem string // Problem(err)
	Use     string // the DaemonFile's Use
}

// Inspect checks every path of DaemonFiles that exists (skills/*/SKILL.md
// and inbox/* for each entry) the way the daemon opens it, and returns
// what it would refuse: a link out of the workspace, a FIFO or other
// special file, a file over its cap, a prompt file that is not UTF-8 text,
// a directory where a file belongs. Paths the model names ("**") cannot be
// listed and are not inspected.
func (f *Files) Inspect() []Finding {
	var out []Finding
	for _, d := range DaemonFiles {
		if d.Path == SessionsDir+"/" {
			// The move never follows a link; one here is left alone.
			if fi, err := f.root.root.Lstat(SessionsDir); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
				out = append(out, Finding{Path: SessionsDir, Problem: "a link, which the start-up move of old sessions does not follow", Use: d.Use})
			}
			continue
		}
		for _, p := range f.expand(d) {
			if err := f.inspect(d, p); err != nil {
				out = append(out, Finding{Path: p, Problem: Problem(err), Use: d.Use})
			}
		}
	}
	return out
}

// expand lists the existing paths a row stands for.
func (f *Files) expand(d DaemonFile) []string {
	p := strings.TrimSuffix(d.Path, "/")
	if p == "**" {
		return nil
	}
	dir, rest, wild := strings.Cut(p, "/*")
	if !wild {
		return []string{p}
	}
	entries, err := f.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if rest == "" || e.IsDir() {
			out = append(out, path.Join(dir, e.Name())+rest)
		}
	}
	return out
}

// inspect opens p as the daemon would for the row d; nil when it is fine
// or missing.
func (f *Files) inspect(d DaemonFile, p string) error {
	var err error
	switch {
	case d.Dir():
		_, err = f.ReadDir(p)
	case d.Text():
		_, _, err = f.ReadText(p, d.Max)
	case d.Max > 0:
		_, err = f.ReadFile(p, d.Max)
	default:
		var file interface{ Close() error }
		file, _, err = f.Open(p)
		if err == nil {
			_ = file.Close()
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
