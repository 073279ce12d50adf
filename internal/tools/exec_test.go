package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/sandbox"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

// newExec builds exec with cfg; limits left zero are the defaults of config.
func newExec(t *testing.T, ws *workspace.Root, cfg config.ExecConfig, opts ExecOptions) *Exec {
	t.Helper()
	d := config.Defaults().Tools.Exec
	if cfg.Timeout == 0 {
		cfg.Timeout = d.Timeout
	}
	if cfg.MaxOutput == 0 {
		cfg.MaxOutput = d.MaxOutput
	}
	e, err := NewExec(cfg, ws, opts, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestExecBasics(t *testing.T) {
	ws, dir := testWorkspace(t, true, map[string]string{"sub/a.txt": "A", "file.txt": "f"})
	e := newExec(t, ws, config.ExecConfig{}, ExecOptions{})
	cases := []struct {
		name    string
		args    args
		isError bool
		want    []string
	}{
		{"stdout and stderr in order, exit code", args{"command": "echo out; echo err >&2; echo out2; exit 3"}, false,
			[]string{"out\nerr\nout2\n\n[exit code 3]"}},
		{"runs in the workspace", args{"command": "pwd"}, false, []string{dir + "\n\n[exit code 0]"}},
		{"working_dir", args{"command": "pwd && cat a.txt", "working_dir": "sub"}, false, []string{filepath.Join(dir, "sub") + "\nA\n[exit code 0]"}},
		{"relative path from working_dir", args{"command": "cat ../file.txt", "working_dir": "sub"}, false, []string{"f\n[exit code 0]"}},
		{"working_dir outside", args{"command": "ls", "working_dir": ".."}, true, []string{"path escapes the workspace"}},
		{"working_dir is a file", args{"command": "ls", "working_dir": "file.txt"}, true, []string{"not a directory"}},
		{"no input", args{"command": "cat"}, false, []string{"(no output)\n[exit code 0]"}},
		{"unknown command", args{"command": "definitely-not-a-command-xyz"}, false, []string{"not found", "[exit code 127]"}},
		{"killed by a signal", args{"command": "kill -9 $$"}, false, []string{"[killed by signal 9 (killed)]"}},
		{"empty command", args{"command": "  "}, true, []string{"command is empty"}},
		{"missing command", args{}, true, []string{`missing required argument "command"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			check(t, runTool(t, e, c.args), c.isError, c.want...)
		})
	}
}

// The background job outlives the shell, holding the output pipe; exec must
// return when the shell exits and kill the job rather than wait for it.
func TestExecKillsBackgroundJobs(t *testing.T) {
	requireProc(t)
	ws, dir := testWorkspace(t, true, map[string]string{})
	e := newExec(t, ws, config.ExecConfig{Timeout: time.Minute}, ExecOptions{})
	start := time.Now()
	res := runTool(t, e, args{"command": "sleep 60 & echo $! > pids; echo started"})
	check(t, res, false, "started\n\n[exit code 0]")
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("exec waited %s for a background job", d)
	}
	for _, pid := range readPids(t, dir) {
		eventually(t, 5*time.Second, fmt.Sprintf("background process %d is gone", pid), func() bool { return processGone(pid) })
	}
}

// A timeout kills the shell and everything it started: its child, a
// grandchild in a subshell, and anything else in the process group.
func TestExecTimeoutKillsProcessGroup(t *testing.T) {
	requireProc(t)
	ws, dir := testWorkspace(t, true, map[string]string{})
	e := newExec(t, ws, config.ExecConfig{Timeout: 2 * time.Second}, ExecOptions{})
	cmd := "echo $$ > pids; sleep 60 & echo $! >> pids; (sleep 61 & echo $! >> pids; wait) & echo working; wait"
	res := runTool(t, e, args{"command": cmd})
	check(t, res, true, "working", "[timed out after 2s: the command and everything it started were killed]")
	pids := readPids(t, dir)
	if len(pids) != 3 {
		t.Fatalf("want 3 pids (shell, child, grandchild), got %v", pids)
	}
	for _, pid := range pids {
		eventually(t, 5*time.Second, fmt.Sprintf("process %d is gone", pid), func() bool { return processGone(pid) })
	}
	eventually(t, 5*time.Second, "process group is empty", func() bool { return len(groupMembers(pids[0])) == 0 })
}

// A call deadline shorter than the tool's timeout (agents.tool_timeout)
// ends the command as a timeout, not as a /stop: the result says so even
// when it reaches the registry before the registry's own timeout answer.
func TestExecCallDeadlineIsATimeout(t *testing.T) {
	requireProc(t)
	ws, _ := testWorkspace(t, true, map[string]string{})
	e := newExec(t, ws, config.ExecConfig{Timeout: time.Minute}, ExecOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	res, err := e.Run(ctx, Invocation{Args: json.RawMessage(`{"command":"sleep 60"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(res.Text, "[timed out after ") || strings.Contains(res.Text, "cancelled") {
		t.Fatalf("result %q, want a timeout", res.Text)
	}
}

// Cancelling the turn (/stop) kills the group the same way.
func TestExecCancelKillsProcessGroup(t *testing.T) {
	requireProc(t)
	ws, dir := testWorkspace(t, true, map[string]string{})
	e := newExec(t, ws, config.ExecConfig{Timeout: time.Minute}, ExecOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan Result, 1)
	go func() {
		res, _ := e.Run(ctx, Invocation{Args: json.RawMessage(`{"command":"sleep 60 & echo $! > pids; echo $$ >> pids; wait"}`)})
		done <- res
	}()
	eventually(t, 10*time.Second, "the command wrote its pids", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "pids"))
		return err == nil && strings.Count(string(b), "\n") == 2
	})
	cancel()
	res := <-done
	if !res.IsError || !strings.Contains(res.Text, "[cancelled: the command and everything it started were killed]") {
		t.Fatalf("result %q", res.Text)
	}
	pids := readPids(t, dir)
	for _, pid := range pids {
		eventually(t, 5*time.Second, fmt.Sprintf("process %d is gone", pid), func() bool { return processGone(pid) })
	}
	eventually(t, 5*time.Second, "process group is empty", func() bool { return len(groupMembers(pids[1])) == 0 })
}

func TestExecOutputCap(t *testing.T) {
	ws, _ := testWorkspace(t, true, map[string]string{})
	e := newExec(t, ws, config.ExecConfig{MaxOutput: 1000}, ExecOptions{})
	res := runTool(t, e, args{"command": "yes abcdefghi | head -c 100000; echo; echo END"})
	check(t, res, false, "[... 99005 bytes of output cut ...]", "END\n\n[exit code 0]")
	if n := len(res.Content.Live); n > 1200 {
		t.Fatalf("capped output is %d bytes", n)
	}
	if !strings.HasPrefix(res.Content.Live, "abcdefghi\nabcdefghi\n") {
		t.Fatalf("head not kept: %q", res.Content.Live[:40])
	}

	res = runTool(t, e, args{"command": `i=0; while [ $i -lt 3000 ]; do printf 'é'; i=$((i+1)); done`})
	if !utf8.ValidString(res.Content.Live) || !strings.Contains(res.Content.Live, "bytes of output cut") {
		t.Fatalf("multi-byte output cut badly: %q", res.Content.Live)
	}

	// An endless flood is bounded by the timeout and costs little memory.
	e = newExec(t, ws, config.ExecConfig{MaxOutput: 1000, Timeout: 300 * time.Millisecond}, ExecOptions{})
	res = runTool(t, e, args{"command": "yes"})
	check(t, res, true, "bytes of output cut", "timed out after 300ms")
}

func TestHeadTail(t *testing.T) {
	h := newHeadTail(10)
	for _, s := range []string{"0123", "4567", "89ab", "cdef"} {
		_, _ = h.Write([]byte(s))
	}
	if got := h.String(); got != "01234\n\n[... 6 bytes of output cut ...]\n\nbcdef" {
		t.Fatalf("%q", got)
	}
	h = newHeadTail(10)
	_, _ = h.Write([]byte("short"))
	if got := h.String(); got != "short" {
		t.Fatalf("%q", got)
	}
	// Cuts inside multi-byte characters drop the partial characters.
	h = newHeadTail(6)
	_, _ = h.Write([]byte("ééééééééé"))
	if got := h.String(); !utf8.ValidString(got) || !strings.HasPrefix(got, "é\n\n") || !strings.HasSuffix(got, "cut ...]\n\né") {
		t.Fatalf("%q", got)
	}
}

func TestExecEnvironmentScrubbed(t *testing.T) {
	ws, _ := testWorkspace(t, true, map[string]string{})
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=/home/someone",
		"INNOCENT=hello",
		"NANOBOT_PROVIDERS_OPENAI_API_KEY=sk-config",
		"nanobot_lower=x",
		"OPENAI_API_KEY=sk-live",
		"GITHUB_TOKEN=ghp_x",
		"AWS_SECRET_ACCESS_KEY=aws",
		"DB_PASSWORD=pw",
		"SNEAKY=Bearer 1234567890:telegram-bot-token",
		"TINY=ab",
		"NOT_TINY=abc",
	}
	e := newExec(t, ws, config.ExecConfig{}, ExecOptions{Env: env, Secrets: []string{"1234567890:telegram-bot-token", "ab", ""}})
	res := runTool(t, e, args{"command": "env"})
	out := res.Content.Live
	for _, keep := range []string{"INNOCENT=hello", "HOME=/home/someone", "NOT_TINY=abc", "PATH="} {
		if !strings.Contains(out, keep) {
			t.Errorf("%s missing from the child's environment", keep)
		}
	}
	for _, gone := range []string{"NANOBOT_", "nanobot_lower", "sk-config", "sk-live", "ghp_x", "aws", "DB_PASSWORD", "telegram-bot-token", "TINY=ab\n"} {
		if strings.Contains(out, gone) {
			t.Errorf("%q leaked into the child's environment:\n%s", gone, out)
		}
	}

	// By default the daemon's own environment is inherited, scrubbed.
	t.Setenv("NANOBOT_TEST_SECRET", "hunter2-in-parent")
	t.Setenv("NANOBOT_EXEC_VISIBLE_CHECK", "1")
	t.Setenv("EXEC_TEST_PLAIN", "visible")
	e = newExec(t, ws, config.ExecConfig{}, ExecOptions{})
	out = runTool(t, e, args{"command": "env"}).Content.Live
	if strings.Contains(out, "hunter2-in-parent") || !strings.Contains(out, "EXEC_TEST_PLAIN=visible") {
		t.Fatalf("parent environment not scrubbed as expected:\n%s", out)
	}
}

func TestExecDenied(t *testing.T) {
	rules, err := compileDeny([]string{`(?i)\bgit\s+push\b`})
	if err != nil {
		t.Fatal(err)
	}
	denied := []string{
		"rm -rf /", "rm -rf /*", "rm -fr ~", "rm -rf ~/", "rm -r $HOME", "rm -rf ${HOME}/*", "sudo rm -rf --no-preserve-root /",
		"rm -rf ..", "rm --recursive /etc", "rm -Rf /usr/", "cd /tmp && rm -rf /home", "rm / -rf", `r\m -rf "/"`, "rm${IFS}-rf${IFS}/",
		"/bin/rm -rf /", "echo hi; rm -rf ~",
		"rm -rf *", "rm -rf .", "rm -rf ./*",
		"mkfs.ext4 /dev/sda1", "mkfs -t ext4 /dev/sdb", "sudo wipefs -a /dev/sda", "fdisk /dev/nvme0n1",
		"dd if=/dev/zero of=/dev/sda bs=1M", "dd if=x.img of=/dev/mmcblk0", "cat x > /dev/sda", "shred -n 1 /dev/sdb",
		"shutdown -h now", "sudo reboot", "poweroff", "echo x && halt", "init 0", "systemctl reboot", "systemctl --force poweroff",
		":(){ :|:& };:", "bomb() { bomb | bomb & }; bomb",
		"chmod -R 777 /", "chown -R nobody /", "chmod 777 /", "chmod -R 000 /etc", "chgrp -R users ~",
		"kill -9 -1", "pkill -f nanobot", "killall nanobot", "mv important.txt /dev/null", "crontab -r",
		"find / -name '*.log' -delete", "find ~ -delete",
		"git push origin main",
	}
	allowed := []string{
		"ls -la", "rm notes.txt", "rm -rf build/", "rm -rf ./tmp/cache", "rm -rf /tmp/nanobot-scratch/x", "rm -f *.log",
		"git rm -r --cached .", "dd if=/dev/urandom of=random.bin bs=1k count=1", "echo reboot > note.txt && cat note.txt",
		"grep -r shutdown docs/", "chmod 600 notes.md", "chmod -R u+w scripts", "kill -9 12345", "find . -name '*.tmp' -delete",
		"python3 -c 'print(1)'", "df -h", "mkdir -p a/b",
	}
	for _, c := range denied {
		if checkDenied(c, rules, true) == "" {
			t.Errorf("not denied: %s", c)
		}
	}
	for _, c := range allowed {
		if reason := checkDenied(c, rules, true); reason != "" {
			t.Errorf("denied (%s): %s", reason, c)
		}
	}
	// "*" is only dangerous at the workspace root.
	if checkDenied("rm -rf *", rules, false) != "" {
		t.Error("rm -rf * in a subdirectory denied")
	}

	ws, dir := testWorkspace(t, true, map[string]string{"keep.txt": "k"})
	e := newExec(t, ws, config.ExecConfig{DenyPatterns: []string{`(?i)\bgit\s+push\b`}}, ExecOptions{})
	check(t, runTool(t, e, args{"command": "rm -rf *"}), true, "Refused: this command recursively deletes *")
	check(t, runTool(t, e, args{"command": "git push"}), true, `Refused: this command matches the deny pattern (?i)\bgit\s+push\b`)
	if readWS(t, dir, "keep.txt") != "k" {
		t.Fatal("refused command ran")
	}
	if _, err := NewExec(config.ExecConfig{DenyPatterns: []string{"(unclosed"}}, ws, ExecOptions{}, zaptest.NewLogger(t)); err == nil ||
		!strings.Contains(err.Error(), "tools.exec.deny_patterns") {
		t.Fatalf("bad pattern: %v", err)
	}
}

func TestExecPathChecks(t *testing.T) {
	restricted, _ := testWorkspace(t, true, map[string]string{"notes/a.md": "a", "sub/x": "x"})
	open, _ := testWorkspace(t, false, map[string]string{"notes/a.md": "a"})
	cases := []struct {
		cmd, wd          string
		restricted, open string // "" allowed, otherwise a substring of the refusal
	}{
		{"cat notes/a.md", ".", "", ""},
		{"cat ./notes/../notes/a.md", ".", "", ""},
		{"cat /etc/passwd", ".", "/etc/passwd is outside the workspace", ""},
		{"cat '/etc/passwd'", ".", "outside the workspace", ""},
		{"head --file=/etc/shadow", ".", "outside the workspace", ""},
		{"cat ../secret", ".", "../secret is outside", ""},
		{"cd .. && ls", ".", ".. is outside", ""},
		{"cat ~/.ssh/id_rsa", ".", "outside", ""},
		{"cat $HOME/.bashrc", ".", "outside", ""},
		{"cat ${HOME}/.bashrc", ".", "outside", ""},
		// The daemon's own environment (its keys) through /proc.
		{"cat /proc/$PPID/environ", ".", "outside the workspace", ""},
		{"tr '\\0' '\\n' < /proc/self/../$PPID/environ", ".", "outside the workspace", ""},
		{"cat ../x/../notes", "sub", "", ""},
		{"cat sessions/telegram_42.jsonl", ".", "in sessions/", "in sessions/"},
		{"ls sessions", ".", "in sessions/", "in sessions/"},
		{"ls ./Sessions/", ".", "in sessions/", "in sessions/"},
		{"cd sessions; cat *", ".", "in sessions/", "in sessions/"},
		{"cat ../sessions/x", "sub", "in sessions/", "in sessions/"},
		{"echo hi > /dev/null 2>&1", ".", "", ""},
		{"/usr/bin/env python3 -V", ".", "", ""},
		{"curl -s https://example.com/a/b?c=/etc/passwd", ".", "", ""},
		{"ls notes/sessions", ".", "", ""},
		{"echo sessions", ".", "in sessions/", "in sessions/"},
	}
	for _, c := range cases {
		for _, mode := range []struct {
			ws   *workspace.Root
			want string
		}{{restricted, c.restricted}, {open, c.open}} {
			err := checkPaths(c.cmd, mode.ws, c.wd)
			switch {
			case mode.want == "" && err != nil:
				t.Errorf("restrict=%v %q refused: %v", mode.ws.Restricted(), c.cmd, err)
			case mode.want != "" && (err == nil || !strings.Contains(err.Error(), mode.want)):
				t.Errorf("restrict=%v %q: got %v, want a refusal containing %q", mode.ws.Restricted(), c.cmd, err, mode.want)
			}
		}
	}
}

func TestExecSpecMentionsLimits(t *testing.T) {
	ws, _ := testWorkspace(t, true, map[string]string{})
	e := newExec(t, ws, config.ExecConfig{Timeout: 30 * time.Second, MaxOutput: 5000}, ExecOptions{})
	d := e.Spec().Description
	for _, want := range []string{"30s", "5000 bytes", "Paths outside the workspace"} {
		if !strings.Contains(d, want) {
			t.Errorf("description lacks %q: %s", want, d)
		}
	}
}

func requireProc(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("inspects processes through /proc")
	}
}

func readPids(t *testing.T, dir string) []int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "pids"))
	if err != nil {
		t.Fatalf("the command did not record its pids: %v", err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	return pids
}

// procStat returns the state letter and process group of pid, ok false when
// the process does not exist.
func procStat(pid int) (state string, pgrp int, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, false
	}
	// The command name is in parentheses and may contain spaces.
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	fields := strings.Fields(rest)
	pgrp, _ = strconv.Atoi(fields[2])
	return fields[0], pgrp, true
}

// processGone reports that pid no longer runs. A zombie (dead, waiting for
// its parent to collect it) counts as gone.
func processGone(pid int) bool {
	state, _, ok := procStat(pid)
	return !ok || state == "Z" || state == "X"
}

// groupMembers lists the live processes of process group pgid.
func groupMembers(pgid int) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if state, pgrp, ok := procStat(pid); ok && pgrp == pgid && state != "Z" && state != "X" {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestExecSandboxed: with a Confiner the kernel, not the text check, decides
// what a command reaches: a system file the heuristics would refuse is
// read, a file next to the workspace is not, and the private $TMPDIR is
// gone after the call.
func TestExecSandboxed(t *testing.T) {
	if sandbox.ABI() < 1 {
		t.Skip("this kernel has no Landlock")
	}
	ws, dir := testWorkspace(t, true, map[string]string{"a.txt": "inside"})
	if err := os.WriteFile(filepath.Join(filepath.Dir(dir), "outside.txt"), []byte("OUTSIDE-SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	policy, err := sandbox.NewPolicy(dir, nil, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	l, err := sandbox.NewLauncher(policy)
	if err != nil {
		t.Fatal(err)
	}
	e := newExec(t, ws, config.ExecConfig{}, ExecOptions{Confiner: l, Env: []string{"PATH=/usr/bin:/bin"}})
	if !strings.Contains(e.Spec().Description, "sandbox") {
		t.Errorf("the description does not say commands are confined: %s", e.Spec().Description)
	}
	check(t, runTool(t, e, args{"command": "cat a.txt && head -c 4 /etc/passwd"}), false, "inside", "root", "[exit code 0]")
	res := runTool(t, e, args{"command": "cat ../outside.txt"})
	check(t, res, false, "Permission denied")
	if strings.Contains(res.Content.Live, "OUTSIDE-SECRET") {
		t.Errorf("read outside the workspace: %s", res.Content.Live)
	}
	res = runTool(t, e, args{"command": `echo "$TMPDIR"`})
	tmp := strings.TrimSpace(strings.Split(res.Content.Live, "\n")[0])
	if !strings.Contains(tmp, "nanobot-exec-") {
		t.Fatalf("TMPDIR = %q", tmp)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("the private temp dir %s outlived the call: %v", tmp, err)
	}
}

// TestExecRefusesWhenTheSandboxIsRequired: without Landlock and with
// sandbox: required, every command is refused with the reason.
func TestExecRefusesWhenTheSandboxIsRequired(t *testing.T) {
	ws, _ := testWorkspace(t, true, map[string]string{})
	e := newExec(t, ws, config.ExecConfig{}, ExecOptions{Refuse: "tools.exec.sandbox is required, and this kernel has no Landlock"})
	check(t, runTool(t, e, args{"command": "echo hi"}), true, "Refused: tools.exec.sandbox is required")
	if !strings.Contains(e.Spec().Description, "disabled") {
		t.Errorf("the description does not say exec is disabled: %s", e.Spec().Description)
	}
}
