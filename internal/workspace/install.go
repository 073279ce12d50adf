package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Install copies the template tmpl into the workspace directory dir, creating
// dir if needed. It never overwrites or changes anything that already exists:
// an existing file is left as it is, so running onboard again only adds what
// is missing. New directories get mode 0700 and new files 0600, because the
// workspace holds personal notes and memory.
//
// created lists what was added, as slash-separated paths relative to dir in
// template order; directories end in "/".
func Install(tmpl fs.FS, dir string) (created []string, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("workspace install: %w", err)
	}
	// Writing through os.Root means a symlink already in dir cannot redirect
	// a template file outside the workspace.
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace install: %w", err)
	}
	defer root.Close()

	err = fs.WalkDir(tmpl, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		if d.IsDir() {
			made, err := installDir(root, p)
			if made {
				created = append(created, p+"/")
			}
			if errors.Is(err, errNotDir) {
				// Something else is there (a file, a FIFO, a link out of
				// the workspace): left alone with what the template would
				// put below it, never a reason not to start; doctor reports
				// it (Files.Inspect).
				return fs.SkipDir
			}
			return err
		}
		made, err := installFile(tmpl, root, p)
		if made {
			created = append(created, p)
		}
		return err
	})
	if err != nil {
		return created, fmt.Errorf("workspace install into %s: %w", dir, err)
	}
	return created, nil
}

func installDir(root *os.Root, p string) (made bool, err error) {
	err = root.Mkdir(p, 0o700)
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return false, err
	}
	fi, err := root.Lstat(p)
	if err != nil {
		return false, err
	}
	if !fi.IsDir() {
		return false, fmt.Errorf("%s: %w", p, errNotDir)
	}
	return false, nil
}

// errNotDir: what is where the template has a directory is no directory.
var errNotDir = errors.New("exists and is not a directory")

func installFile(tmpl fs.FS, root *os.Root, p string) (made bool, err error) {
	data, err := fs.ReadFile(tmpl, p)
	if err != nil {
		return false, err
	}
	// O_EXCL never follows a symlink and fails on anything that exists, which
	// is exactly "never overwrite".
	f, err := root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		// The file is ours (O_EXCL); remove the partial copy so the next
		// install retries it instead of keeping it half-written forever.
		_ = root.Remove(p)
		return false, fmt.Errorf("write %s: %w", p, werr)
	}
	return true, nil
}
