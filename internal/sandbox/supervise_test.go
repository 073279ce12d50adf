//go:build linux

package sandbox_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/nanobot-go/nanobot/internal/sandbox"
)

// liveSleep returns the live processes running `sleep n`.
func liveSleep(n int) []int {
	var out []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		cmdline, _ := os.ReadFile(d + "/cmdline")
		if string(cmdline) != "sleep\x00"+strconv.Itoa(n)+"\x00" {
			continue
		}
		stat, _ := os.ReadFile(d + "/stat")
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) && stat[i+2] != 'Z' {
			pid, _ := strconv.Atoi(filepath.Base(d))
			out = append(out, pid)
		}
	}
	return out
}

// Without namespaces (the fallback under a unit that restricts them) the
// launcher is a subreaper: a command's processes that left its group and
// its parent are still killed when the command ends and when the launcher
// is told to stop (SIGTERM, also its parent-death signal). Each isolation
// this machine allows is tried.
func TestLauncherLeavesNoSurvivorInEveryIsolation(t *testing.T) {
	f := newFixture(t)
	p, err := sandbox.NewPolicy(f.ws, nil, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	l, err := sandbox.NewLauncher(p)
	if err != nil {
		t.Fatal(err)
	}
	isolations := []string{sandbox.IsolationSubreaper}
	if l.Isolation() != sandbox.IsolationSubreaper {
		isolations = append(isolations, l.Isolation())
	}
	for _, iso := range isolations {
		for _, stop := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stop=%v", iso, stop), func(t *testing.T) {
				l.ForceIsolation(iso)
				n := 800000 + rand.IntN(100000)
				script := fmt.Sprintf("setsid sleep %d & ( ( sleep %d & ) & )\nwhile [ $(pgrep -c -f '^sleep %d$') -lt 2 ]; do sleep 0.05; done; echo up", n, n, n)
				if stop {
					script += "; sleep 60"
				}
				cmd, cleanup, err := l.Command(f.ws, []string{"PATH=/usr/bin:/bin"}, "/bin/sh", "-c", script)
				if err != nil {
					t.Fatal(err)
				}
				defer cleanup()
				out, err := cmd.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				buf := make([]byte, 3)
				if _, err := out.Read(buf); err != nil || string(buf) != "up\n" {
					t.Fatalf("the survivors did not start: %q %v", buf, err)
				}
				if stop {
					_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
				}
				_ = cmd.Wait()
				if left := liveSleep(n); len(left) > 0 {
					t.Errorf("survivors after the launcher ended: %v", left)
					for _, pid := range left {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			})
		}
	}
}
