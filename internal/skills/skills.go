// Package skills discovers the agent's skills: Markdown instruction files
// (SKILL.md with YAML frontmatter) that teach the model how to do something.
// Built-in skills are embedded in the binary; a workspace skill of the same
// name overrides a built-in one (docs/skills.md#where-skills-come-from). The
// package renders the skills summary and the always-on skill bodies that go
// into the system prompt (README.md#the-workspace,
// docs/skills.md#in-the-system-prompt). It reads files; it never runs
// anything.
package skills

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"runtime"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Skill is one discovered skill.
type Skill struct {
	Name        string
	Description string
	// Always skills have their body injected into every system prompt.
	Always bool
	// Location is where the model can read the skill with read_file: a
	// workspace path ("skills/github/SKILL.md") or, for an embedded skill,
	// "builtin:" and its path in the built-in file system
	// ("builtin:github/SKILL.md"), which read_file serves from that
	// file system (see BuiltinScheme).
	Location string
	Builtin  bool
	Requires Requirements
	// Missing lists unmet requirements ("CLI: gh", "ENV: GITHUB_TOKEN",
	// "OS: darwin"); the skill is available when it is empty.
	Missing []string
	// Body is the Markdown after the frontmatter.
	Body string
}

// Available reports whether every requirement is met.
func (s Skill) Available() bool { return len(s.Missing) == 0 }

// Requirements is what a skill needs from the machine.
type Requirements struct {
	Bins []string `yaml:"bins" json:"bins"`
	Env  []string `yaml:"env" json:"env"`
	OS   []string `yaml:"os" json:"os"`
}

// frontmatter is the YAML header of a SKILL.md. metadata may be a YAML map or
// a JSON string (as HKUDS/nanobot and OpenClaw skills write it), keyed by
// "nanobot" or "openclaw".
type frontmatter struct {
	Name        string    `yaml:"name"`
	Description string    `yaml:"description"`
	Always      bool      `yaml:"always"`
	Metadata    yaml.Node `yaml:"metadata"`
}

type metadata struct {
	Requires Requirements `yaml:"requires" json:"requires"`
	OS       []string     `yaml:"os" json:"os"`
	Always   bool         `yaml:"always" json:"always"`
}

// Env is the machine a skill's requirements are checked against. The zero
// value checks the real machine.
type Env struct {
	LookPath func(string) (string, error)
	Getenv   func(string) string
	GOOS     string
}

func (e Env) withDefaults() Env {
	if e.LookPath == nil {
		e.LookPath = exec.LookPath
	}
	if e.Getenv == nil {
		e.Getenv = os.Getenv
	}
	if e.GOOS == "" {
		e.GOOS = runtime.GOOS
	}
	return e
}

// BuiltinScheme prefixes the location of a built-in skill's file: the rest
// is its path in Loader.Builtin.
const BuiltinScheme = "builtin:"

// Loader finds skills in a workspace and an embedded built-in set.
type Loader struct {
	// Workspace is the workspace's skills/ directory, holding skills as
	// <name>/SKILL.md; nil for none. The daemon passes
	// workspace.Files.FS, which never follows a link out of the workspace
	// and caps what it reads (docs/tools.md#the-daemon-and-the-workspace).
	Workspace fs.FS
	// Builtin holds built-in skills as <name>/SKILL.md; nil for none.
	Builtin fs.FS
	Env     Env
}

// Load returns all skills sorted by name. A malformed skill file is skipped
// and reported in the returned error (joined), so one bad file never hides
// the others.
func (l Loader) Load() ([]Skill, error) {
	env := l.Env.withDefaults()
	byName := map[string]Skill{}
	var errs []error
	if l.Builtin != nil {
		entries, err := fs.ReadDir(l.Builtin, ".")
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("builtin skills: %w", err))
		}
		errs = append(errs, parseAll(byName, l.Builtin, entries, env, true)...)
	}
	if l.Workspace != nil {
		entries, err := fs.ReadDir(l.Workspace, ".")
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("workspace skills: %w", err))
		}
		// After the built-ins: a workspace skill overrides a built-in of
		// the same name.
		errs = append(errs, parseAll(byName, l.Workspace, entries, env, false)...)
	}
	out := make([]Skill, 0, len(byName))
	for _, s := range byName {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Skill) int { return strings.Compare(a.Name, b.Name) })
	return out, errors.Join(errs...)
}

// parseAll parses the SKILL.md of each directory among entries, read from
// fsys (the built-ins, or the workspace's skills/), into byName, replacing a
// skill of the same name. A directory without the file is not a skill; the
// errors are of malformed ones.
func parseAll(byName map[string]Skill, fsys fs.FS, entries []fs.DirEntry, env Env, builtin bool) []error {
	what, prefix := "skill", "skills/"
	if builtin {
		what, prefix = "builtin skill", BuiltinScheme
	}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		file := path.Join(e.Name(), "SKILL.md")
		data, err := fs.ReadFile(fsys, file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			// A link, a FIFO, a huge file: skipped, the rest still load.
			errs = append(errs, fmt.Errorf("%s %s: %w", what, e.Name(), err))
			continue
		}
		s, err := Parse(e.Name(), data, env)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", what, e.Name(), err))
			continue
		}
		s.Builtin = builtin
		s.Location = prefix + file
		byName[s.Name] = s
	}
	return errs
}

// Parse reads one SKILL.md. dirName names the skill when the frontmatter does not.
func Parse(dirName string, data []byte, env Env) (Skill, error) {
	env = env.withDefaults()
	fm, body, err := splitFrontmatter(data)
	if err != nil {
		return Skill{}, err
	}
	var front frontmatter
	if len(fm) > 0 {
		if err := yaml.Unmarshal(fm, &front); err != nil {
			return Skill{}, fmt.Errorf("frontmatter: %w", err)
		}
	}
	meta, err := decodeMetadata(&front.Metadata)
	if err != nil {
		return Skill{}, fmt.Errorf("frontmatter metadata: %w", err)
	}
	s := Skill{
		Name:        front.Name,
		Description: strings.TrimSpace(front.Description),
		Always:      front.Always || meta.Always,
		Requires:    meta.Requires,
		Body:        strings.TrimSpace(string(body)),
	}
	if s.Name == "" {
		s.Name = dirName
	}
	if len(meta.OS) > 0 {
		s.Requires.OS = append(s.Requires.OS, meta.OS...)
	}
	s.Missing = missing(s.Requires, env)
	return s, nil
}

func splitFrontmatter(data []byte) (fm, body []byte, err error) {
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	if !bytes.HasPrefix(data, []byte("---")) {
		return nil, data, nil
	}
	rest := data[3:]
	nl := bytes.IndexByte(rest, '\n')
	if nl < 0 || len(bytes.TrimSpace(rest[:nl])) != 0 {
		return nil, data, nil
	}
	rest = rest[nl+1:]
	for off := 0; off <= len(rest); {
		line := rest[off:]
		end := bytes.IndexByte(line, '\n')
		if end < 0 {
			end = len(line)
		}
		if bytes.Equal(bytes.TrimRight(line[:end], " \t\r"), []byte("---")) {
			next := off + end + 1
			if next > len(rest) {
				next = len(rest)
			}
			return rest[:off], rest[next:], nil
		}
		off += end + 1
	}
	return nil, nil, errors.New("frontmatter is not closed with ---")
}

// decodeMetadata accepts metadata as a map or a JSON string, under the key
// "nanobot" or "openclaw".
func decodeMetadata(n *yaml.Node) (metadata, error) {
	var wrapper map[string]metadata
	switch n.Kind {
	case 0:
		return metadata{}, nil
	case yaml.ScalarNode:
		if strings.TrimSpace(n.Value) == "" {
			return metadata{}, nil
		}
		if err := json.Unmarshal([]byte(n.Value), &wrapper); err != nil {
			return metadata{}, fmt.Errorf("metadata string is not JSON: %w", err)
		}
	default:
		if err := n.Decode(&wrapper); err != nil {
			return metadata{}, err
		}
	}
	if m, ok := wrapper["nanobot"]; ok {
		return m, nil
	}
	return wrapper["openclaw"], nil
}

func missing(r Requirements, env Env) []string {
	var out []string
	for _, b := range r.Bins {
		if _, err := env.LookPath(b); err != nil {
			out = append(out, "CLI: "+b)
		}
	}
	for _, e := range r.Env {
		if env.Getenv(e) == "" {
			out = append(out, "ENV: "+e)
		}
	}
	if len(r.OS) > 0 && !slices.Contains(r.OS, env.GOOS) {
		out = append(out, "OS: "+strings.Join(r.OS, "|"))
	}
	return out
}
