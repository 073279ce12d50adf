package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// The reproduced cases of the daemon as the confused deputy (issue
// 35): a command the model ran planted a file in the workspace, and the
// daemon — unconfined — read it, waited on it, ran out of memory on it or
// followed it. Each test runs the real binary and fails on 665c3cc.

// hangGuard bounds one run of the binary: a turn that waits on a FIFO
// never ends by itself, and the test must report it rather than hang.
const hangGuard = 2 * time.Minute

// deputyTurn runs one turn of the real binary (nanobot agent -m) in e and
// returns its output and the raw bodies of the requests the model got. It
// fails the test if the turn hangs, the binary crashes or the answer does
// not arrive.
func deputyTurn(t *testing.T, e *env, extraEnv ...string) (out string, bodies []string) {
	t.Helper()
	before := len(e.script.Requests())
	e.script.Push(fakellm.Reply{Text: "done"})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "agent", "-m", "hello")
	cmd.Env = e.escapeEnv(extraEnv...)
	b, err := cmd.CombinedOutput()
	out = string(b)
	switch {
	case ctx.Err() != nil:
		t.Fatalf("the turn hung (killed after %s)\n%s", hangGuard, out)
	case err != nil:
		t.Fatalf("the binary failed: %v\n%s", err, out)
	case !strings.Contains(out, "done"):
		t.Fatalf("no answer:\n%s", out)
	}
	for _, req := range e.script.Requests()[before:] {
		bodies = append(bodies, string(req.Raw))
	}
	if len(bodies) == 0 {
		t.Fatalf("the model got no request\n%s", out)
	}
	return out, bodies
}

// noLeak fails the test for every secret a request to the model carried.
func noLeak(t *testing.T, bodies []string) {
	t.Helper()
	for _, b := range bodies {
		if leaked := leaks(b); len(leaked) > 0 {
			t.Errorf("the model's request carried %v", leaked)
		}
	}
}

// TestDeputyBootstrapLinksKeepSecretsOut: the one exec call,
// `ln -sf ../config.yaml USER.md; ln -sf /proc/self/environ SOUL.md;
// ln -sf ../web-token TOOLS.md`, done here by the test as the command would
// (whether the sandbox lets a command make them depends on the mode; the
// daemon must not care). The prompt carries none of the config's keys, the
// daemon's environment or the web token.
func TestDeputyBootstrapLinksKeepSecretsOut(t *testing.T) {
	e := escapeHome(t, "auto", true, "[]")
	ws := e.workspace()
	for link, target := range map[string]string{"USER.md": "../config.yaml", "SOUL.md": "/proc/self/environ", "TOOLS.md": "../web-token"} {
		if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	_, bodies := deputyTurn(t, e)
	noLeak(t, bodies)
	if !strings.Contains(bodies[0], "AGENTS.md") {
		t.Error("the prompt lost the sound bootstrap file too")
	}
}

// TestDeputyFIFOMemoryDoesNotHang: memory/MEMORY.md replaced by a FIFO
// with no writer: the turn goes on without it instead of waiting forever.
func TestDeputyFIFOMemoryDoesNotHang(t *testing.T) {
	e := escapeHome(t, "auto", true, "[]")
	mem := filepath.Join(e.workspace(), "memory", "MEMORY.md")
	if err := os.MkdirAll(filepath.Dir(mem), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(mem, 0o600); err != nil {
		t.Fatal(err)
	}
	deputyTurn(t, e)
}

// TestDeputyHugeAgentsFileDoesNotCrash: `truncate -s 64G AGENTS.md`; the
// next turn used to end the binary with "fatal error: out of memory", and
// every restart after it.
func TestDeputyHugeAgentsFileDoesNotCrash(t *testing.T) {
	e := escapeHome(t, "auto", true, "[]")
	if err := os.Truncate(filepath.Join(e.workspace(), "AGENTS.md"), 64<<30); err != nil {
		t.Skip("no sparse files here:", err)
	}
	out, _ := deputyTurn(t, e)
	if strings.Contains(out, "out of memory") {
		t.Errorf("out of memory:\n%s", out)
	}
	deputyTurn(t, e) // and the next start too
}

// TestDeputySessionsLinkIsNotFollowed: `ln -s /some/dir sessions` in the
// workspace, then a restart: the start-up move of an old sessions/ used to
// follow the link and move every regular file of that folder into the
// sessions directory. Now the link is left alone, and so is the folder.
func TestDeputySessionsLinkIsNotFollowed(t *testing.T) {
	e := escapeHome(t, "auto", true, "[]")
	victim := filepath.Join(e.home, ".ssh")
	key := filepath.Join(victim, "id_ed25519")
	if err := os.MkdirAll(victim, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, []byte("PRIVATE KEY\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(e.workspace(), "sessions")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	deputyTurn(t, e)
	if got, err := os.ReadFile(key); err != nil || string(got) != "PRIVATE KEY\n" {
		t.Errorf("the linked folder's file was moved: %q, %v", got, err)
	}
	if _, err := os.Lstat(filepath.Join(e.home, ".nanobot", "sessions", "id_ed25519")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file of the linked folder is in the sessions dir: %v", err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was removed: %v", err)
	}
}
