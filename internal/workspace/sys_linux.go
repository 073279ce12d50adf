package workspace

import (
	"os"
	"strconv"
	"strings"
)

// openPath returns the real path of the open file f, as the kernel records it
// in /proc/self/fd. ok is false when /proc is not mounted (some sandboxes);
// confinement then rests on Resolve and os.Root alone.
func openPath(f *os.File) (path string, ok bool) {
	var fd uintptr
	conn, err := f.SyscallConn()
	if err != nil {
		return "", false
	}
	// Control gives the descriptor without switching the file to blocking
	// mode, which f.Fd() would do.
	if err := conn.Control(func(d uintptr) { fd = d }); err != nil {
		return "", false
	}
	p, err := os.Readlink("/proc/self/fd/" + strconv.FormatUint(uint64(fd), 10))
	if err != nil || !strings.HasPrefix(p, "/") {
		return "", false
	}
	// A file deleted while open reads as "/path (deleted)"; its old location
	// is still the right one to judge.
	return strings.TrimSuffix(p, " (deleted)"), true
}
