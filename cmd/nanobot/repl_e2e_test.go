//go:build unix

package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// term is the real binary's REPL in a pseudo-terminal, as a person runs it.
type term struct {
	t      *testing.T
	cmd    *exec.Cmd
	tty    *os.File
	mu     sync.Mutex
	out    strings.Builder
	exited chan struct{}
}

func startREPL(t *testing.T, e *env) *term {
	t.Helper()
	cmd := exec.Command(binary, "agent")
	cmd.Env = e.environ()
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 120})
	if err != nil {
		t.Fatal(err)
	}
	r := &term{t: t, cmd: cmd, tty: tty, exited: make(chan struct{})}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			r.mu.Lock()
			r.out.Write(buf[:n])
			r.mu.Unlock()
			if err != nil {
				return // EIO once the child is gone
			}
		}
	}()
	go func() {
		_ = cmd.Wait()
		close(r.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-r.exited
		_ = tty.Close()
		<-copied
	})
	return r
}

func (r *term) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

// type writes keys to the terminal ("\r" is Enter, "\x03" Ctrl-C, "\x04"
// Ctrl-D).
func (r *term) press(keys string) {
	r.t.Helper()
	if _, err := io.WriteString(r.tty, keys); err != nil {
		r.t.Fatal(err)
	}
}

// waitFor waits until the screen shows want n times in all.
func (r *term) waitFor(want string, n int) {
	r.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(r.output(), want) < n {
		select {
		case <-r.exited:
			r.t.Fatalf("the REPL exited waiting for %q ×%d:\n%s", want, n, r.output())
		case <-time.After(10 * time.Millisecond): // polling the screen
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("waiting for %q ×%d; the screen shows:\n%s", want, n, r.output())
		}
	}
}

// exitCode waits for the REPL to exit.
func (r *term) exitCode() int {
	r.t.Helper()
	select {
	case <-r.exited:
	case <-time.After(30 * time.Second):
		r.t.Fatalf("the REPL did not exit:\n%s", r.output())
	}
	return r.cmd.ProcessState.ExitCode()
}

const prompt = "you> "

// The REPL in a real terminal: a hint before the first prompt and no log
// line anywhere on the screen (the log goes to agent.log); Ctrl-C during an
// answer stops it and returns to the prompt; at the prompt one Ctrl-C says
// how to leave and a second one leaves, the shutdown finished; Ctrl-D and
// /exit leave too.
func TestREPLInATerminal(t *testing.T) {
	leave := map[string]func(r *term){
		"Ctrl-C twice": func(r *term) {
			r.press("\x03")
			r.waitFor("Ctrl-C again to leave", 1)
			r.press("\x03")
		},
		"Ctrl-D": func(r *term) { r.press("\x04") },
		"/exit":  func(r *term) { r.press("/exit\r") },
	}
	for name, leave := range leave {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			story := strings.Repeat("once upon a time ", 200)
			e.script.Push(fakellm.Reply{Text: story, Chunk: 6, ChunkDelay: 40 * time.Millisecond},
				fakellm.Reply{Text: "The second answer."})
			r := startREPL(t, e)
			r.waitFor(prompt, 1)
			if before := r.output(); !strings.Contains(before, "Ctrl-C stops an answer; Ctrl-D or /exit leaves.") {
				t.Errorf("no hint before the prompt:\n%s", before)
			}

			r.press("tell me a long story\r")
			r.waitFor("once upon a time once upon", 1)
			r.press("\x03")
			r.waitFor("Stopped.", 1)
			r.waitFor(prompt, 2)
			if strings.Contains(r.output(), story) {
				t.Error("the whole story was printed: Ctrl-C did not stop it")
			}

			r.press("and now?\r")
			r.waitFor("The second answer.", 1)
			r.waitFor(prompt, 3)
			leave(r)
			if code := r.exitCode(); code != 0 {
				t.Errorf("exit status %d after %s:\n%s", code, name, r.output())
			}
			screen := r.output()
			t.Logf("the screen:\n%s", screen)
			for _, noise := range []string{"INFO", "WARN", "DEBUG", `"level"`, "without finishing the shutdown"} {
				if strings.Contains(screen, noise) {
					t.Errorf("the screen shows %q:\n%s", noise, screen)
				}
			}
			log, err := os.ReadFile(filepath.Join(e.home, ".nanobot", agentLogFile))
			if err != nil || !strings.Contains(string(log), "turn done") {
				t.Errorf("agent.log (err %v) holds no turn:\n%s", err, log)
			}
			if n := len(e.script.Requests()); n != 2 {
				t.Errorf("the model was asked %d times, want 2", n)
			}
		})
	}
}
