package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/telegramfake"
)

// gatewayProc is the real binary running `nanobot gateway`.
type gatewayProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stderr *lockedBuffer
	base   string // http://host:port of its listener
	exited chan struct{}
	err    error // Wait's result, once exited is closed
}

// telegramEnv configures the Telegram channel against the fake, for the
// allowed users, with a short poll so shutdown is prompt.
func telegramEnv(tg *telegramfake.Server, allowed ...int64) []string {
	ids := make([]string, len(allowed))
	for i, id := range allowed {
		ids[i] = strconv.FormatInt(id, 10)
	}
	return []string{
		"NANOBOT_CHANNELS_TELEGRAM_ENABLED=true",
		"NANOBOT_CHANNELS_TELEGRAM_TOKEN=" + telegramfake.Token,
		"NANOBOT_CHANNELS_TELEGRAM_API_URL=" + tg.URL(),
		"NANOBOT_CHANNELS_TELEGRAM_ALLOW_FROM=" + strings.Join(ids, ","),
		"NANOBOT_CHANNELS_TELEGRAM_POLL_TIMEOUT=1s",
		"NANOBOT_GATEWAY_LISTEN=127.0.0.1:0",
		"NANOBOT_GATEWAY_HEARTBEAT_ENABLED=false",
	}
}

// startGateway runs the gateway with the user's environment plus extra and
// waits until it listens. The process is killed at the end of the test if
// it is still running.
func (e *env) startGateway(extra []string, args ...string) *gatewayProc {
	e.t.Helper()
	return e.startGatewayEnv(e.environ(extra...), args...)
}

// startGatewayEnv is startGateway with vars as the whole environment.
func (e *env) startGatewayEnv(vars []string, args ...string) *gatewayProc {
	e.t.Helper()
	p := &gatewayProc{t: e.t, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(binary, append(args, "gateway")...)
	p.cmd.Env = vars
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	e.t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if e.t.Failed() {
			e.t.Logf("gateway stderr:\n%s", p.stderr.String())
		}
	})
	waitUntil(e.t, "the gateway to listen", 20*time.Second, func() bool {
		line, ok := p.logLine("gateway started")
		if ok {
			p.base = "http://" + line["listen"].(string)
		}
		return ok || p.done()
	})
	if p.done() {
		e.t.Fatalf("gateway exited at start: %v\n%s", p.err, p.stderr.String())
	}
	return p
}

func (p *gatewayProc) done() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// logLines returns the JSON log lines written so far (stderr is not a
// terminal, so every line is JSON).
func (p *gatewayProc) logLines() []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(p.stderr.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

func (p *gatewayProc) logLine(msg string) (map[string]any, bool) {
	for _, l := range p.logLines() {
		if l["msg"] == msg {
			return l, true
		}
	}
	return nil, false
}

func (p *gatewayProc) signal(sig os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
}

// wait waits for the process to exit and returns its exit code.
func (p *gatewayProc) wait(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.exited:
	case <-time.After(timeout):
		p.t.Fatalf("gateway did not exit within %s\n%s", timeout, p.stderr.String())
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		p.t.Fatal(p.err)
	}
	return 0
}

func (p *gatewayProc) get(path string) (int, string, error) {
	resp, err := http.Get(p.base + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), nil
}

func (p *gatewayProc) waitReady() {
	p.t.Helper()
	waitUntil(p.t, "/readyz to answer 200", 20*time.Second, func() bool {
		code, _, err := p.get("/readyz")
		return err == nil && code == 200
	})
}

// waitUntil polls cond until it holds or the deadline passes.
func waitUntil(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkSessionFiles checks that every line of every session file is
// complete JSON (no half-written entry) and returns the message roles per
// file name.
func checkSessionFiles(t *testing.T, dir string) map[string][]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string][]string{}
	for _, de := range entries {
		if !strings.HasSuffix(de.Name(), ".jsonl") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > 0 && data[len(data)-1] != '\n' {
			t.Errorf("%s does not end with a newline: a torn last line", de.Name())
		}
		roles[de.Name()] = []string{}
		for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
			var rec struct {
				Type    string `json:"type"`
				Message *struct {
					Role string `json:"role"`
				} `json:"message"`
			}
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Errorf("%s line %d is not JSON: %v: %s", de.Name(), i+1, err, line)
				continue
			}
			if rec.Type == "message" && rec.Message != nil {
				roles[de.Name()] = append(roles[de.Name()], rec.Message.Role)
			}
		}
	}
	return roles
}

func sessionFile(chat int64) string { return fmt.Sprintf("telegram_%d.jsonl", chat) }

func TestGatewaySecondSignalExitsAtOnce(t *testing.T) {
	e := newEnv(t)
	tg := telegramfake.New(t)
	e.script.Func = func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Text: "late", Delay: time.Minute} }
	p := e.startGateway(append(telegramEnv(tg, 7), "NANOBOT_GATEWAY_SHUTDOWN_GRACE=60s"))
	p.waitReady()
	tg.PushMessage(telegramfake.DM(7, "take your time"))
	waitUntil(t, "the model call", 10*time.Second, func() bool { return len(e.script.Requests()) == 1 })

	p.signal(syscall.SIGTERM)
	waitUntil(t, "shutdown to begin", 10*time.Second, func() bool {
		_, ok := p.logLine("shutting down: taking no new messages, finishing running turns")
		return ok
	})
	p.signal(syscall.SIGTERM)
	// The turn's model call takes a minute and the grace period is 60 s:
	// an exit within 30 s is one that waited for neither, whatever the
	// machine's load (a tighter bound would measure the load).
	code := p.wait(30 * time.Second)
	if code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit code after a second SIGTERM = %d, want %d", code, 128+int(syscall.SIGTERM))
	}
	if !strings.Contains(p.stderr.String(), "second signal") {
		t.Errorf("stderr does not say why it exited:\n%s", p.stderr.String())
	}
}

func TestHealthcheckCommand(t *testing.T) {
	e := newEnv(t)
	tg := telegramfake.New(t)
	vars := telegramEnv(tg, 7) // the gateway listens on a port of its choosing
	// The commands find the gateway at gateway.listen: the address it
	// chose, or one where nothing listens. (A port chosen before the start
	// could be taken by another process meanwhile.)
	listen := freeAddr(t)
	healthcheck := func(args ...string) (string, error) {
		cmd := exec.Command(binary, append([]string{"healthcheck"}, args...)...)
		cmd.Env = e.environ(append(vars, "NANOBOT_GATEWAY_LISTEN="+listen)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := healthcheck(); err == nil {
		t.Errorf("healthcheck succeeded with no gateway running: %s", out)
	}
	p := e.startGateway(vars)
	p.waitReady()
	listen = strings.TrimPrefix(p.base, "http://")
	if out, err := healthcheck(); err != nil || out != "ok\n" {
		t.Errorf("healthcheck = %q, %v", out, err)
	}
	if out, err := healthcheck("--ready"); err != nil || !strings.Contains(out, `"ready":true`) {
		t.Errorf("healthcheck --ready = %q, %v", out, err)
	}
	status := exec.Command(binary, "status")
	status.Env = e.environ(append(vars, "NANOBOT_GATEWAY_LISTEN="+listen)...)
	if out, err := status.Output(); err != nil || !strings.Contains(string(out), "running, ready") {
		t.Errorf("status does not show the running gateway: %v\n%s", err, out)
	}
	p.signal(syscall.SIGTERM)
	if code := p.wait(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}
