package sandbox_test

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/sandbox"
)

// The test binary stands in for nanobot: started with __sandbox-exec, it is
// the launcher.
func TestMain(m *testing.M) {
	sandbox.MaybeLaunch()
	os.Exit(m.Run())
}

func TestResolve(t *testing.T) {
	tests := []struct {
		mode                      string
		abi                       int
		network                   bool
		confined, refused, warned bool
		netUnenforced             bool
	}{
		{mode: "", abi: 7, network: true, confined: true},
		{mode: sandbox.ModeAuto, abi: 7, network: false, confined: true},
		{mode: sandbox.ModeAuto, abi: 3, network: false, confined: true, netUnenforced: true},
		{mode: sandbox.ModeAuto, abi: 0, network: true, warned: true},
		{mode: sandbox.ModeRequired, abi: 1, network: true, confined: true},
		{mode: sandbox.ModeRequired, abi: 0, network: true, refused: true},
		{mode: sandbox.ModeOff, abi: 7, network: true, warned: true},
	}
	for _, tt := range tests {
		st := sandbox.Resolve(tt.mode, tt.abi, tt.network)
		if st.Confined != tt.confined || (st.Refuse != "") != tt.refused || (st.Warning != "") != tt.warned ||
			st.NetworkUnenforced != tt.netUnenforced {
			t.Errorf("Resolve(%q, %d, %v) = %+v", tt.mode, tt.abi, tt.network, st)
		}
		if (tt.refused || tt.warned) && st.Fix == "" {
			t.Errorf("Resolve(%q, %d): no fix given", tt.mode, tt.abi)
		}
	}
}

func TestABIOverrideSimulatesAnOldKernel(t *testing.T) {
	t.Setenv("NANOBOT_TEST_LANDLOCK_ABI", "0")
	if got := sandbox.ABI(); got != 0 {
		t.Fatalf("ABI() = %d with the override at 0", got)
	}
}

// TestGrantsCarveProtectedPaths: a hierarchy holding a protected path is
// granted entry by entry without it, and symbolic links met on the way are
// not followed.
func TestGrantsCarveProtectedPaths(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	secret := filepath.Join(dir, "secret")
	for _, d := range []string{filepath.Join(ws, "notes"), filepath.Join(ws, "sessions"), secret} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "a.md"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	p, err := sandbox.NewPolicy(ws, nil, []string{filepath.Join(ws, "sessions"), filepath.Join(ws, "missing")}, true)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range p.Grants() {
		if strings.HasPrefix(g.Path, dir) {
			got = append(got, fmt.Sprintf("%s list=%v", strings.TrimPrefix(g.Path, dir), g.List))
		}
	}
	slices.Sort(got)
	if want := []string{"/ws list=true", "/ws/a.md list=false", "/ws/notes list=false"}; !slices.Equal(got, want) {
		t.Errorf("grants under the workspace = %v, want %v (no sessions, no symlink)", got, want)
	}

	// The same, named through a symbolic link to the workspace.
	if err := os.Symlink(ws, filepath.Join(dir, "wslink")); err != nil {
		t.Fatal(err)
	}
	p, err = sandbox.NewPolicy(filepath.Join(dir, "wslink"), nil, []string{filepath.Join(dir, "wslink", "sessions")}, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range p.Grants() {
		if g.Path == ws && !g.List || strings.Contains(g.Path, "sessions") {
			t.Errorf("through a link, the protected sessions are granted: %+v", g)
		}
	}

	// Without a protected path inside, the workspace is one grant.
	p, err = sandbox.NewPolicy(ws, nil, []string{secret}, true)
	if err != nil {
		t.Fatal(err)
	}
	var whole bool
	for _, g := range p.Grants() {
		whole = whole || (g.Path == ws && g.Write)
	}
	if !whole {
		t.Errorf("workspace not granted whole: %+v", p.Grants())
	}
}

// fixture is a home with a secret next to a workspace.
type fixture struct {
	home, ws, secret string
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	if runtime.GOOS != "linux" || sandbox.ABI() < 1 {
		t.Skip("needs a Linux kernel with Landlock")
	}
	home := t.TempDir()
	f := fixture{home: home, ws: filepath.Join(home, "ws"), secret: filepath.Join(home, "secret.txt")}
	if err := os.MkdirAll(filepath.Join(f.ws, "sessions"), 0o700); err != nil {
		t.Fatal(err)
	}
	for path, text := range map[string]string{
		f.secret:                                "TOP-SECRET-KEY",
		filepath.Join(f.ws, "note.md"):          "hello",
		filepath.Join(f.ws, "sessions/x.jsonl"): "OTHER-CHAT",
	} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// run runs script with sh in the workspace through the launcher.
func (f fixture) run(t *testing.T, p sandbox.Policy, script string) (string, error) {
	t.Helper()
	l, err := sandbox.NewLauncher(p)
	if err != nil {
		t.Fatal(err)
	}
	cmd, cleanup, err := l.Command(f.ws, []string{"PATH=/usr/bin:/bin", "HOME=" + f.home}, "/bin/sh", "-c", script)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.String(), err
}

func TestLauncherConfines(t *testing.T) {
	f := newFixture(t)
	p, err := sandbox.NewPolicy(f.ws, nil, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	// carved protects sessions/ inside the workspace: the rest of it stays
	// usable, but no new entry can be made at its top.
	carved, err := sandbox.NewPolicy(f.ws, nil, []string{filepath.Join(f.ws, "sessions")}, true)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, script, want string
		ok                 bool
	}{
		{"workspace readable", "cat note.md", "hello", true},
		{"workspace writable", "mkdir -p d && echo made > d/x && cat d/x", "made", true},
		{"temp dir private and writable", `echo t > "$TMPDIR/t" && cat "$TMPDIR/t" && case "$TMPDIR" in */nanobot-exec-*) echo private;; esac`, "private", true},
		{"system readable", "cat /etc/passwd | head -1", "root", true},
		{"home closed", "cat ../secret.txt", "Permission denied", false},
		{"home closed by absolute path", "cat " + f.secret, "Permission denied", false},
		{"protected inside the workspace", "cat sessions/x.jsonl", "Permission denied", false},
		{"protected inside the workspace, by glob", "cat s*/*", "Permission denied", false},
		{"carved workspace still listed", "ls", "note.md", true},
		{"symlink to a secret", "mkdir -p l && ln -s " + f.secret + " l/s && cat l/s", "Permission denied", false},
		{"hard link to a secret", "mkdir -p h && ln " + f.secret + " h/s", "", false},
		{"write outside", "echo x > " + filepath.Join(f.home, "evil"), "Permission denied", false},
		{"disks closed", "ls /dev/", "Permission denied", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			policy := p
			if strings.Contains(tt.name, "protected inside") || strings.Contains(tt.name, "carved") {
				policy = carved
			}
			out, err := f.run(t, policy, tt.script)
			if (err == nil) != tt.ok || !strings.Contains(out, tt.want) {
				t.Errorf("%s: err %v, output %q; want ok=%v and %q", tt.script, err, out, tt.ok, tt.want)
			}
			if strings.Contains(out, "TOP-SECRET") || strings.Contains(out, "OTHER-CHAT") {
				t.Errorf("%s leaked: %q", tt.script, out)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(f.home, "evil")); err == nil {
		t.Error("a file was written outside the workspace")
	}
}

// TestLauncherExposes: tools.exec.expose opens a path read-only or
// read-write, and nothing next to it.
func TestLauncherExposes(t *testing.T) {
	f := newFixture(t)
	ro, rw := filepath.Join(f.home, "ro"), filepath.Join(f.home, "rw")
	for _, d := range []string{ro, rw} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "f"), []byte("exposed"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p, err := sandbox.NewPolicy(f.ws, []sandbox.Path{{Path: ro}, {Path: rw, Write: true}}, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := f.run(t, p, "cat "+ro+"/f "+rw+"/f && echo new > "+rw+"/g && cat "+rw+"/g"); err != nil || out != "exposedexposednew\n" {
		t.Errorf("exposed paths: %v %q", err, out)
	}
	if out, err := f.run(t, p, "echo x > "+ro+"/g"); err == nil {
		t.Errorf("wrote into a read-only exposed path: %q", out)
	}
	if out, err := f.run(t, p, "cat "+f.secret); err == nil {
		t.Errorf("exposing paths opened the home: %q", out)
	}
}

// TestLauncherKeepsTheParentsProcEntriesClosed: run as root or not, a
// confined command cannot read a non-dumpable parent's environment or
// memory. (Landlock checks ptrace attach, which covers mem; environ is a
// ptrace read, which only non-dumpable plus the dropped CAP_SYS_PTRACE
// close.) The daemon is this test process: its pid is named explicitly,
// since the command's parent is the launcher; in the launcher's PID
// namespace the daemon's pid names nothing at all.
func TestLauncherKeepsTheParentsProcEntriesClosed(t *testing.T) {
	f := newFixture(t)
	t.Setenv("SANDBOX_TEST_PARENT_SECRET", "PARENT-ENV-SECRET")
	if err := sandbox.Harden(); err != nil {
		t.Fatal(err)
	}
	p, err := sandbox.NewPolicy(f.ws, nil, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	daemon := strconv.Itoa(os.Getpid())
	for _, file := range []string{"environ", "mem", "maps", "fd/0"} {
		out, err := f.run(t, p, "cat /proc/"+daemon+"/"+file+" | tr 'A-Za-z' 'N-ZA-Mn-za-m'")
		if strings.Contains(out, "CNERAG-RAI-FRPERG") || !strings.Contains(out, "ermission denied") && !strings.Contains(out, "No such file") {
			t.Errorf("/proc/%s/%s: %v %q", daemon, file, err, out)
		}
	}
	if out, _ := f.run(t, p, "grep CapEff /proc/self/status"); !strings.Contains(out, "0000000000000000") {
		t.Errorf("the command kept capabilities: %q", out)
	}
	// Landlock's signal scope (ABI 6): the daemon cannot be signalled.
	if sandbox.ABI() >= 6 {
		if out, err := f.run(t, p, "kill -0 "+daemon); err == nil {
			t.Errorf("a confined command may signal the daemon: %q", out)
		}
		if out, err := f.run(t, p, "sleep 5 & kill $! && wait $!; echo killed-own"); !strings.Contains(out, "killed-own") {
			t.Errorf("a confined command cannot signal its own child: %v %q", err, out)
		}
	}
}

// TestLauncherNetwork: with network on, TCP connects reach the policy's
// ports and no other (a loopback service of the daemon's is out of reach
// until its port is listed); with network off none, where the kernel has
// Landlock's TCP rules (ABI 4). (It used to assert that any port was
// reachable with network on; that was the hole of docs/tools.md#network.)
func TestLauncherNetwork(t *testing.T) {
	f := newFixture(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("pong")) }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	script := "exec 3<>/dev/tcp/127.0.0.1/" + port + " && echo connected"
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("needs bash for /dev/tcp")
	}
	n, _ := strconv.Atoi(port)
	for _, tc := range []struct {
		network bool
		ports   []uint16
		want    bool
	}{
		{true, []uint16{80, 443, uint16(n)}, true},
		{true, []uint16{80, 443}, sandbox.ABI() < 4},
		{false, []uint16{uint16(n)}, sandbox.ABI() < 4},
	} {
		p, err := sandbox.NewPolicy(f.ws, nil, nil, tc.network)
		if err != nil {
			t.Fatal(err)
		}
		p.ConnectPorts = tc.ports
		out, err := f.run(t, p, "/bin/bash -c '"+script+"'")
		if got := err == nil && strings.Contains(out, "connected"); got != tc.want {
			t.Errorf("network %v, ports %v: connected = %v, want %v (%v %q)", tc.network, tc.ports, got, tc.want, err, out)
		}
	}
}

// TestLauncherRefusesWithoutPolicy: a malformed call fails closed.
func TestLauncherRefusesWithoutPolicy(t *testing.T) {
	if code := sandbox.Main([]string{"{not json", "/bin/true"}); code != 126 {
		t.Errorf("Main with a bad policy = %d, want 126", code)
	}
}

// TestSystemLinksLeadingOutAreGranted: /etc/resolv.conf pointing into /run
// (systemd-resolved) is readable, or commands would have no DNS.
func TestSystemLinksLeadingOutAreGranted(t *testing.T) {
	etc, run := t.TempDir(), t.TempDir()
	target := filepath.Join(run, "stub-resolv.conf")
	if err := os.WriteFile(target, []byte("nameserver 127.0.0.53\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(etc, "resolv.conf")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(etc, "hosts-real"), filepath.Join(etc, "hosts")); err != nil { // dangling
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(target)
	if got := sandbox.LinksOut(etc, []string{"/usr"}); !slices.Equal(got, []string{real}) {
		t.Errorf("LinksOut = %v, want [%s]", got, real)
	}
	if got := sandbox.LinksOut(etc, []string{run}); len(got) != 0 {
		t.Errorf("a link inside a granted directory was added: %v", got)
	}
}
