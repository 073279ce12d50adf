package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/sandbox"
)

// confinedExec is exec with the real launcher (this test binary, whose
// TestMain calls sandbox.MaybeLaunch) on a fresh workspace.
func confinedExec(t *testing.T, cfg config.ExecConfig, ports ...uint16) *Exec {
	t.Helper()
	if sandbox.ABI() < 1 {
		t.Skip("this kernel has no Landlock")
	}
	ws, dir := testWorkspace(t, true, map[string]string{"a.txt": "inside"})
	policy, err := sandbox.NewPolicy(dir, nil, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	policy.ConnectPorts = ports
	l, err := sandbox.NewLauncher(policy)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("isolation: %s", l.Isolation())
	return newExec(t, ws, cfg, ExecOptions{Confiner: l, Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin"}})
}

// survivorTricks are the ways a command leaves its call's process group or
// parent: each starts `sleep N` for a marker N.
var survivorTricks = map[string]string{
	"background":  `sleep %d &`,
	"setsid":      `setsid sleep %d &`,
	"double fork": `( ( sleep %d & ) & )`,
	"nohup":       `nohup sleep %d >/dev/null 2>&1 &`,
	"setsid -f":   `setsid -f sleep %d`,
	"daemon":      `python3 -c 'import os,sys; os.fork() and sys.exit(); os.setsid(); os.fork() and sys.exit(); os.execvp("sleep", ["sleep", "%d"])'`,
}

// sleepers returns the live processes (zombies excluded) whose command line
// is `sleep N`, as the daemon's /proc shows them.
func sleepers(n int) []int {
	var out []int
	want := "sleep\x00" + strconv.Itoa(n) + "\x00"
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		cmdline, err := os.ReadFile(d + "/cmdline")
		if err != nil || string(cmdline) != want {
			continue
		}
		stat, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue
		}
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(d))
		out = append(out, pid)
	}
	return out
}

// No process outlives its call (docs/tools.md#processes): whatever the
// command did to detach, every process it started is gone when the call
// returns — after a normal end, a timeout, and a cancelled turn (/stop,
// the turn's end, shutdown).
func TestConfinedCommandLeavesNoSurvivor(t *testing.T) {
	base := 600000 + rand.IntN(300000)
	ends := []struct {
		name    string
		cfg     config.ExecConfig
		suffix  string
		cancel  bool
		isError bool
	}{
		{"exit", config.ExecConfig{}, "; echo started", false, false},
		{"timeout", config.ExecConfig{Timeout: 2 * time.Second}, "; echo started; sleep 30", false, true},
		{"cancel", config.ExecConfig{}, "; echo started; sleep 30", true, true},
	}
	i := 0
	for _, end := range ends {
		e := confinedExec(t, end.cfg)
		for name, trick := range survivorTricks {
			i++
			n := base + i
			t.Run(end.name+"/"+name, func(t *testing.T) {
				ctx := context.Background()
				if end.cancel {
					var cancel context.CancelFunc
					ctx, cancel = context.WithCancel(ctx)
					// Cancel once the survivor is up: what /stop does mid-call.
					go func() {
						defer cancel()
						for range 500 {
							if len(sleepers(n)) > 0 {
								return
							}
							time.Sleep(10 * time.Millisecond)
						}
					}()
				}
				// The call starts the survivor and waits until it runs.
				cmd := fmt.Sprintf(trick, n) + fmt.Sprintf("\nwhile ! pgrep -f '^sleep %d$' >/dev/null; do sleep 0.05; done", n) + end.suffix
				raw, _ := json.Marshal(args{"command": cmd})
				res, err := e.Run(ctx, Invocation{CallID: "c1", Args: raw})
				if err != nil {
					t.Fatal(err)
				}
				if res.IsError != end.isError || !strings.Contains(res.Text, "started") && !end.cancel {
					t.Fatalf("is_error = %v, want %v:\n%s", res.IsError, end.isError, res.Text)
				}
				if left := sleepers(n); len(left) > 0 {
					t.Errorf("%s outlived the call (%s): pids %v", name, end.name, left)
					for _, p := range left {
						_ = unix.Kill(p, unix.SIGKILL)
					}
				}
			})
		}
	}
}

// No descriptor but the three it is given: one the daemon opened without
// O_CLOEXEC does not reach the command either.
func TestConfinedCommandGetsOnlyItsThreeDescriptors(t *testing.T) {
	e := confinedExec(t, config.ExecConfig{})
	fd, err := unix.Open("/dev/null", unix.O_RDONLY, 0) // deliberately inheritable
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Close(fd) }()
	res := runTool(t, e, args{"command": "ls /proc/self/fd | tr '\\n' ' '"})
	// ls lists the directory through one more descriptor of its own (3).
	check(t, res, false, "0 1 2 3 \n", "[exit code 0]")
}

// No view of other processes where the kernel gives the launcher a PID
// namespace with its own /proc: a process of the daemon's side (here a
// sleep this test starts) is not listed.
func TestConfinedCommandSeesOnlyItsOwnProcesses(t *testing.T) {
	e := confinedExec(t, config.ExecConfig{})
	if iso := e.confiner.(*sandbox.Launcher).Isolation(); iso != sandbox.IsolationPIDNamespace {
		t.Skipf("isolation here is %q: /proc shows the daemon's namespace (docs/tools.md#processes)", iso)
	}
	n := 900000 + rand.IntN(90000)
	outside := startSleep(t, n)
	res := runTool(t, e, args{"command": fmt.Sprintf("cat /proc/[0-9]*/cmdline | tr '\\0' ' '; echo; ls /proc | grep -c '^[0-9]'; test -e /proc/%d && echo VIS''IBLE", outside)})
	if strings.Contains(res.Content.Live, fmt.Sprintf("sleep %d", n)) || strings.Contains(res.Content.Live, "VISIBLE") {
		t.Errorf("the command sees a process outside its call:\n%s", res.Content.Live)
	}
}

func startSleep(t *testing.T, n int) int {
	t.Helper()
	p, err := os.StartProcess("/bin/sleep", []string{"sleep", strconv.Itoa(n)}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill(); _, _ = p.Wait() })
	return p.Pid
}

// With the network on, a command connects to the ports the policy lists
// and to no other: a loopback service of the daemon's (here an HTTP server
// on a port of its own) is out of reach until its port is listed.
func TestConfinedCommandConnectsOnlyToListedPorts(t *testing.T) {
	if sandbox.ABI() < 4 {
		t.Skip("this kernel's Landlock has no TCP rules (ABI 4)")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("daemon-service")) }))
	defer srv.Close()
	_, portText, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(portText)
	connect := fmt.Sprintf(`python3 -c 'import socket; s=socket.create_connection(("127.0.0.1", %d), 5); s.sendall(b"GET / HTTP/1.0\r\n\r\n"); print(s.recv(4096).decode())'`, port)

	closed := confinedExec(t, config.ExecConfig{}, 80, 443)
	res := runTool(t, closed, args{"command": connect})
	if strings.Contains(res.Content.Live, "daemon-service") || !strings.Contains(res.Content.Live, "PermissionError") {
		t.Errorf("a command reached an unlisted loopback port:\n%s", res.Content.Live)
	}
	open := confinedExec(t, config.ExecConfig{}, 80, 443, uint16(port))
	check(t, runTool(t, open, args{"command": connect}), false, "daemon-service", "[exit code 0]")
}
