package main

// The escape suite's "survivors, descriptors, ports" section of the daemon
// as the confused deputy (docs/tools.md#processes, docs/tools.md#network):
// what a command may keep of the daemon's after its call — a process, a
// descriptor, a way to the daemon's loopback services — tried through the
// real binary's exec tool and launcher, on this kernel, on a kernel without
// Landlock (simulated) and with tools.exec.sandbox: off.

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
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/natsfake"
)

// survivorAttacks start `sleep N` for a marker N in each way a process can
// leave its call: the background, a new session, a double fork, nohup, a
// daemonising Python.
func survivorAttacks(base int) map[string]string {
	tricks := map[string]string{
		"surv_background": `sleep %d &`,
		"surv_setsid":     `setsid sleep %d &`,
		"surv_doublefork": `( ( sleep %d & ) & )`,
		"surv_nohup":      `nohup sleep %d >/dev/null 2>&1 &`,
		"surv_daemon":     `python3 -c 'import os,sys; os.fork() and sys.exit(); os.setsid(); os.fork() and sys.exit(); os.execvp("sleep", ["sleep", "%d"])'`,
	}
	out := map[string]string{}
	i := 0
	for _, id := range []string{"surv_background", "surv_setsid", "surv_doublefork", "surv_nohup", "surv_daemon"} {
		i++
		// The call ends only once its survivor runs.
		out[id] = fmt.Sprintf(tricks[id], base+i) +
			fmt.Sprintf("\nwhile ! pgrep -f '^sleep %d$' >/dev/null; do sleep 0.05; done; echo started", base+i)
	}
	return out
}

// liveSleepers returns the pids of live `sleep N` processes for the markers
// base+1..base+n, and kills them (a survivor must not outlive the test).
func liveSleepers(base, n int) map[int][]int {
	out := map[int][]int{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		cmdline, err := os.ReadFile(d + "/cmdline")
		if err != nil {
			continue
		}
		f := strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")
		if len(f) != 2 || f[0] != "sleep" {
			continue
		}
		m, err := strconv.Atoi(f[1])
		if err != nil || m <= base || m > base+n {
			continue
		}
		stat, _ := os.ReadFile(d + "/stat")
		if i := strings.LastIndexByte(string(stat), ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(d))
		out[m] = append(out[m], pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return out
}

// natsAttack speaks the NATS protocol to port with Python: it subscribes
// to every subject and publishes a reply to a stranger's chat, as the
// issue's attacker did. It prints INFO and PONG when it got through.
func natsAttack(port string) string {
	return `python3 -c '
import socket
s = socket.create_connection(("127.0.0.1", ` + port + `), 5)
print(s.recv(4096).decode().split(" ")[0])
s.sendall(b"CONNECT {\"verbose\":false}\r\nSUB nanobot.> 1\r\nPUB nanobot.outbound.telegram.666 5\r\nhello\r\nPING\r\n")
# The answers of the server may come in several reads (MSG before PONG): read
# until the PONG, or until the socket times out or closes.
got = b""
while b"PONG" not in got:
    chunk = s.recv(4096)
    if not chunk:
        break
    got += chunk
print(got.decode())
'`
}

// natsHome is the escape fixture on the NATS bus without credentials
// (allowed by docs/scale-out.md), the real nats-server the scale-out tests
// use, in sandbox mode.
func natsHome(t *testing.T, mode string) (*env, string) {
	t.Helper()
	srv := natsfake.Start(t, t.TempDir())
	e := escapeHome(t, mode, true, "[]")
	path := filepath.Join(e.home, ".nanobot", "config.yaml")
	old := "bus:\n  nats:\n    url: nats://" + escNATS + "@127.0.0.1:4222\n"
	cfg := string(mustRead(t, path))
	if !strings.Contains(cfg, old) {
		t.Fatalf("the escape fixture's bus section changed; update natsHome:\n%s", cfg)
	}
	cfg = strings.Replace(cfg, old, "bus:\n  backend: nats\n  nats:\n    url: "+srv.URL()+"\n", 1)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return e, strings.TrimPrefix(srv.URL(), "nats://127.0.0.1:")
}

// TestSandboxEscapeSuiteSurvivorsDescriptorsPorts: confined by Landlock on
// this kernel, no process a command starts outlives the call (nor the
// binary), a command holds only descriptors 0, 1 and 2, it sees no process
// but its own where the launcher has a PID namespace, and it cannot reach
// NATS on loopback (the bus of the whole deployment) though curl's ports
// stay open.
func TestSandboxEscapeSuiteSurvivorsDescriptorsPorts(t *testing.T) {
	if sandbox.ABI() < 4 {
		t.Skip("needs Landlock with TCP rules (ABI 4)")
	}
	e, natsPort := natsHome(t, "auto")
	base := 700000 + rand.IntN(200000)
	attacks := survivorAttacks(base)
	attacks["fds"] = `ls /proc/self/fd | tr '\n' ' '`
	attacks["procs"] = `ls /proc | grep -c '^[0-9]'`
	attacks["nats"] = natsAttack(natsPort)
	attacks["web_port"] = `python3 -c 'import socket; socket.create_connection(("127.0.0.1", 443), 2)' 2>&1 | tail -1`
	// Another chat's reminders are in the data dir now, out of reach.
	const reminder = "OTHER-CHAT-REMINDER-27182818"
	jobs := filepath.Join(e.home, ".nanobot", "cron", "jobs.json")
	if err := os.MkdirAll(filepath.Dir(jobs), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(jobs, []byte(`{"version": 1, "jobs": [{"message": "`+reminder+`"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	attacks["cron_read"] = `cat ~/.nanobot/cron/jobs.json ../cron/jobs.json cron/jobs.json 2>&1 | rev`
	results, out := e.runTools(t, attacks, nil)
	if strings.Contains(reverse(results["cron_read"]), reminder) {
		t.Errorf("a command read another chat's reminders:\n%s", results["cron_read"])
	}
	if left := liveSleepers(base, 5); len(left) > 0 {
		t.Errorf("processes outlived their call and the binary: %v\n%s", left, out)
	}
	for id := range survivorAttacks(base) {
		if !strings.Contains(results[id], "started") {
			t.Errorf("%s did not run:\n%s", id, results[id])
		}
	}
	if !strings.Contains(results["fds"], "0 1 2 3 \n") {
		t.Errorf("a command holds more than its three descriptors (3 is ls's own):\n%s", results["fds"])
	}
	if n, _ := strconv.Atoi(strings.TrimSpace(strings.Split(results["procs"], "\n")[0])); n > 5 {
		t.Logf("a command sees %d processes: no PID namespace with its own /proc here (docs/tools.md#processes)", n)
	}
	if strings.Contains(results["nats"], "INFO") || strings.Contains(results["nats"], "PONG") || !strings.Contains(results["nats"], "PermissionError") {
		t.Errorf("a confined command reached NATS on loopback:\n%s", results["nats"])
	}
	// Port 443 is allowed: nothing listens here, so the kernel lets the
	// connect through and it is refused by the (absent) peer.
	if !strings.Contains(results["web_port"], "ConnectionRefused") {
		t.Errorf("port 443 is not open to commands:\n%s", results["web_port"])
	}
}

// TestSandboxEscapeSuiteSurvivorsDegraded proves what is exposed without
// the sandbox: on a kernel without Landlock (simulated) in auto mode, and
// with tools.exec.sandbox: off, commands run with the text heuristics
// only; a process that left the call's process group outlives the call,
// and a command speaks NATS on loopback. doctor says so.
func TestSandboxEscapeSuiteSurvivorsDegraded(t *testing.T) {
	for _, tc := range []struct {
		name, mode string
		env        []string
	}{
		{"no landlock", "auto", []string{"NANOBOT_TEST_LANDLOCK_ABI=0"}},
		{"sandbox off", "off", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, natsPort := natsHome(t, tc.mode)
			base := 700000 + rand.IntN(200000)
			attacks := survivorAttacks(base)
			attacks["nats"] = natsAttack(natsPort)
			results, out := e.runTools(t, attacks, nil, tc.env...)
			left := liveSleepers(base, 5)
			if len(left[base+2]) == 0 || len(left[base+5]) == 0 {
				t.Errorf("without the sandbox a setsid and a daemonised process should survive (the degraded mode's finding); left: %v\n%s", left, out)
			}
			if !strings.Contains(results["nats"], "INFO") || !strings.Contains(results["nats"], "PONG") {
				t.Errorf("without the sandbox a command should reach NATS (the degraded mode's finding):\n%s", results["nats"])
			}
			b, _ := e.command(e.escapeEnv(tc.env...), "doctor").CombinedOutput()
			if !strings.Contains(string(b), "exec sandbox") || !strings.Contains(string(b), "[warn]") {
				t.Errorf("doctor does not warn about the exec sandbox:\n%s", b)
			}
		})
	}
}
