// Package builtin holds the skills compiled into the binary
// (docs/skills.md#where-skills-come-from): one directory per skill with its
// SKILL.md. The daemon passes FS to skills.Loader.Builtin, so they are listed
// in every system prompt, and to the read_file tool under
// skills.BuiltinScheme, so the model can read them. A workspace skill of the
// same name overrides a built-in one.
//
// A built-in skill is its SKILL.md alone; other files in its directory are
// not embedded.
package builtin

import (
	"embed"
	"io/fs"
)

//go:embed */SKILL.md
var files embed.FS

// FS returns the built-in skills as <name>/SKILL.md.
func FS() fs.FS { return files }
