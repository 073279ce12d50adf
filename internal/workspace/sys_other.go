//go:build !linux

package workspace

import "os"

// openPath cannot learn an open file's path portably outside Linux; the
// check after opening is skipped there and confinement rests on Resolve and
// os.Root (see docs/tools.md for what that leaves open).
func openPath(*os.File) (string, bool) { return "", false }
