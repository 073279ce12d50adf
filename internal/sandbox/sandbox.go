// Package sandbox confines the processes the model can start (the exec
// tool, and through it skills' scripts and subagents' commands) with the
// kernel's Landlock LSM (docs/tools.md#sandbox).
//
// The daemon does not confine itself: it starts every command through a
// launcher, the hidden `nanobot __sandbox-exec` sub-command (Command), which
// applies a Landlock ruleset to itself and then execs the command, so the
// command and everything it starts inherit the ruleset. What the ruleset
// grants is a Policy: system directories read-only, the workspace and a
// private temporary directory read-write, the paths the user exposes, and
// nothing else. Landlock's ptrace rule keeps the daemon's /proc entries
// (environ, mem, fd) closed to the confined processes, even as root;
// Harden makes the daemon non-dumpable, which closes them to other
// processes of the same user when Landlock is not there.
//
// It imports nothing of the module; the daemon maps the config onto a
// Policy and a Mode, and internal/tools starts commands through a Launcher.
package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Modes of tools.exec.sandbox.
const (
	// ModeAuto confines commands when the kernel has Landlock and falls
	// back to the exec tool's text heuristics, with a warning, when not.
	ModeAuto = "auto"
	// ModeRequired confines commands, and refuses to run any when the
	// kernel has no Landlock.
	ModeRequired = "required"
	// ModeOff runs commands unconfined (the heuristics only).
	ModeOff = "off"
)

// LauncherArg is the hidden sub-command of the nanobot binary that applies
// a Policy and execs a command: `nanobot __sandbox-exec POLICY-JSON ARGV...`.
const LauncherArg = "__sandbox-exec"

// abiEnv lets tests simulate a kernel with another Landlock ABI (0: none).
// Only the daemon's decision reads it; the launcher always asks the kernel,
// so it cannot be used to turn confinement off.
const abiEnv = "NANOBOT_TEST_LANDLOCK_ABI"

// ABI returns the Landlock ABI version the kernel offers, 0 when it has
// none (or the OS is not Linux). NANOBOT_TEST_LANDLOCK_ABI overrides it,
// for tests that simulate an older kernel.
func ABI() int {
	if v, ok := os.LookupEnv(abiEnv); ok {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			return n
		}
	}
	return kernelABI()
}

// State is what a mode means on a kernel: whether commands are confined,
// refused, or run with the heuristics only, and what to tell the operator.
type State struct {
	// Mode is the configured mode (auto, required, off).
	Mode string
	// ABI is the kernel's Landlock ABI version; 0 means no Landlock.
	ABI int
	// Confined says commands start through the launcher.
	Confined bool
	// Refuse, when set, is why every command is refused (required mode
	// without Landlock).
	Refuse string
	// Warning, when set, is the one line to log at start and the doctor
	// finding: commands run with the heuristics only.
	Warning string
	// Fix says what to do about Refuse or Warning.
	Fix string
	// NetworkUnenforced says tools.exec.network: false cannot be enforced
	// on this kernel (Landlock's TCP rules need ABI 4).
	NetworkUnenforced bool
}

// noLandlockFix is what to do on a kernel without Landlock.
const noLandlockFix = "run on Linux 5.13 or later with Landlock enabled (CONFIG_SECURITY_LANDLOCK=y and \"landlock\" in " +
	"the lsm= boot parameter or CONFIG_LSM); in a container, use a kernel that has it (no capability is needed). " +
	"Meanwhile set tools.exec.enabled: false if the model reads untrusted text"

// Resolve returns the state of mode on a kernel offering abi, with network
// the value of tools.exec.network. An empty mode is ModeAuto.
func Resolve(mode string, abi int, network bool) State {
	if mode == "" {
		mode = ModeAuto
	}
	s := State{Mode: mode, ABI: abi}
	switch {
	case mode == ModeOff:
		s.Warning = "tools.exec.sandbox is off: commands the model runs can read everything this user can " +
			"(the config's keys, the web token, every chat's session); only text heuristics guard them"
		s.Fix = "set tools.exec.sandbox: auto"
	case abi >= 1:
		s.Confined = true
	case mode == ModeRequired:
		s.Refuse = "the exec tool is disabled: tools.exec.sandbox is required, and this kernel has no Landlock"
		s.Fix = noLandlockFix
	default:
		s.Warning = "this kernel has no Landlock: commands the model runs are not confined, only text heuristics guard them " +
			"(tools.exec.sandbox: auto)"
		s.Fix = noLandlockFix
	}
	s.NetworkUnenforced = s.Confined && !network && abi < 4
	return s
}

// Describe is the one-line summary `nanobot status` prints.
func (s State) Describe() string {
	switch {
	case s.Confined:
		return fmt.Sprintf("landlock (mode %s, Landlock ABI %d)", s.Mode, s.ABI)
	case s.Refuse != "":
		return fmt.Sprintf("exec refused (mode %s, no Landlock in this kernel)", s.Mode)
	case s.Mode == ModeOff:
		return fmt.Sprintf("off (mode off, Landlock ABI %d)", s.ABI)
	default:
		return fmt.Sprintf("heuristics only (mode %s, no Landlock in this kernel)", s.Mode)
	}
}

// Path is one path the user exposes to commands (tools.exec.expose).
type Path struct {
	Path  string `json:"path"`
	Write bool   `json:"write,omitempty"`
}

// Policy is what a confined command may reach. The launcher receives it
// as JSON on its command line.
type Policy struct {
	// ReadOnly are readable (and executable) hierarchies, system
	// directories; missing ones are skipped.
	ReadOnly []string `json:"ro"`
	// ReadWrite are hierarchies commands may read and change: the
	// workspace, and the private temporary directory Command adds.
	ReadWrite []string `json:"rw"`
	// Devices are device files commands may read and write (/dev/null).
	Devices []string `json:"dev"`
	// Expose are the user's extra paths.
	Expose []Path `json:"expose,omitempty"`
	// Protected are paths no grant may reach even when they lie inside a
	// granted hierarchy (the config and data directory, /etc/nanobot):
	// such a hierarchy is granted entry by entry, without them.
	Protected []string `json:"protected,omitempty"`
	// Network allows TCP; false denies bind and connect where the
	// kernel's Landlock has TCP rules (ABI 4).
	Network bool `json:"net"`
	// ConnectPorts are the TCP ports a command may connect to when
	// Network is set (Landlock ABI 4; older kernels allow every port).
	ConnectPorts []uint16 `json:"ports,omitempty"`
}

// SystemReadOnly are the system directories a command needs to run
// programs; none holds the daemon's data (Protected carves it out if it
// does, as with a config under /etc).
var SystemReadOnly = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/proc", "/nix/store"}

// SystemDevices are the device files shell scripts use. The rest of /dev
// (disks, above all) stays closed: a root command reading /dev/sda would
// read the config from the disk blocks.
var SystemDevices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}

// DefaultProtected are paths protected on every machine: where the systemd
// unit keeps the daemon's secret environment (deploy/nanobot.service).
var DefaultProtected = []string{"/etc/nanobot"}

// NewPolicy returns the policy for a workspace: system paths read-only,
// the workspace read-write, expose as given, and protected (with
// DefaultProtected) carved out of all of them. Paths are made absolute and
// resolved through symbolic links, because Landlock checks the real path.
func NewPolicy(workspace string, expose []Path, protected []string, network bool) (Policy, error) {
	ws, err := realPath(workspace)
	if err != nil {
		return Policy{}, fmt.Errorf("sandbox: workspace: %w", err)
	}
	p := Policy{
		ReadOnly:  append(slices.Clone(SystemReadOnly), linksOut("/etc", SystemReadOnly)...),
		ReadWrite: []string{ws},
		Devices:   slices.Clone(SystemDevices),
		Network:   network,
	}
	for _, e := range expose {
		real, err := realPath(e.Path)
		if os.IsNotExist(err) {
			continue // nothing to expose (yet)
		}
		if err != nil {
			return Policy{}, fmt.Errorf("sandbox: tools.exec.expose %s: %w", e.Path, err)
		}
		p.Expose = append(p.Expose, Path{Path: real, Write: e.Write})
	}
	for _, pr := range append(slices.Clone(DefaultProtected), protected...) {
		if pr == "" {
			continue
		}
		real, err := realPath(pr)
		if err != nil && !os.IsNotExist(err) {
			return Policy{}, fmt.Errorf("sandbox: protected path: %w", err)
		}
		if err != nil { // not there yet: protect the name it will have
			real, _ = filepath.Abs(pr)
		}
		p.Protected = append(p.Protected, filepath.Clean(real))
	}
	return p, nil
}

// linksOut returns where the symbolic links directly in dir lead, when
// that is outside every one of inside. Landlock checks the real path, so
// /etc/resolv.conf -> /run/systemd/resolve/stub-resolv.conf (systemd-resolved)
// would otherwise leave commands without DNS.
func linksOut(dir string, inside []string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.Type()&os.ModeSymlink == 0 {
			continue
		}
		real, err := filepath.EvalSymlinks(filepath.Join(dir, e.Name()))
		if err != nil || slices.Contains(out, real) || slices.ContainsFunc(inside, func(d string) bool { return real == d || within(real, d) }) {
			continue
		}
		out = append(out, real)
	}
	return out
}

// realPath returns p made absolute with its symbolic links resolved.
func realPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	return real, nil
}

// Isolation levels of a launcher: how completely a command's processes are
// contained (docs/tools.md#processes).
const (
	// IsolationPIDNamespace: the launcher is PID 1 of a PID namespace of
	// its own with a /proc of its own. The command sees only its own
	// processes, and when the launcher ends the kernel kills every process
	// left in the namespace, however it detached (setsid, double fork).
	IsolationPIDNamespace = "pid namespace"
	// IsolationSubreaper: no namespace could be made, or no /proc mounted
	// in it (RestrictNamespaces, user namespaces off, a unit's
	// ProtectProc or a container's masked /proc); the launcher is a child subreaper: orphans
	// re-parent to it, and it kills every descendant when the command ends
	// or it is told to stop. A daemon killed with -9 leaves them (the
	// systemd unit's cgroup still ends them on stop).
	IsolationSubreaper = "subreaper"
)

// probeArg, after LauncherArg, makes the launcher report what its
// namespace allows instead of running a command.
const probeArg = "--probe"

// Launcher starts commands under a Policy through the launcher sub-command.
type Launcher struct {
	exe       string
	policy    Policy
	isolation string
}

// NewLauncher returns a launcher for policy. The launcher program is this
// executable (os.Executable): the nanobot binary in production, the test
// binary in tests (whose TestMain calls MaybeLaunch). It starts the
// launcher once to learn which isolation this kernel and service manager
// allow (Isolation).
func NewLauncher(policy Policy) (*Launcher, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("sandbox: find the launcher (os.Executable): %w", err)
	}
	return &Launcher{exe: exe, policy: policy, isolation: probeIsolation(exe)}, nil
}

// Isolation says how a command's processes are contained:
// IsolationPIDNamespace or IsolationSubreaper (docs/tools.md#processes).
func (l *Launcher) Isolation() string { return l.isolation }

// Command returns a command that runs argv in dir with env, confined. Each
// command gets a private temporary directory (TMPDIR), which cleanup
// removes; call it after the command and its process group are gone.
func (l *Launcher) Command(dir string, env []string, argv ...string) (cmd *exec.Cmd, cleanup func(), err error) {
	tmp, err := os.MkdirTemp("", "nanobot-exec-")
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: private temp dir: %w", err)
	}
	cleanup = func() { _ = os.RemoveAll(tmp) }
	p := l.policy
	p.ReadWrite = append(slices.Clone(p.ReadWrite), tmp)
	spec, err := json.Marshal(p)
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("sandbox: encode policy: %w", err)
	}
	cmd = exec.Command(l.exe, append([]string{LauncherArg, string(spec)}, argv...)...)
	cmd.Dir = dir
	cmd.Env = append(withoutVar(env, "TMPDIR"), "TMPDIR="+tmp)
	isolate(cmd, l.isolation != IsolationSubreaper)
	return cmd, cleanup, nil
}

func withoutVar(env []string, name string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// MaybeLaunch runs the launcher and exits when this process was started as
// one (os.Args[1] is LauncherArg); otherwise it returns. Test binaries
// call it first thing in TestMain, so that they can stand in for nanobot.
func MaybeLaunch() {
	if len(os.Args) > 1 && os.Args[1] == LauncherArg {
		os.Exit(Main(os.Args[2:]))
	}
}

// Main is the launcher: args are the policy as JSON, then the command.
// It applies the policy, runs the command and stops every process the
// command left when it ends (docs/tools.md#processes); it returns the
// command's exit status, or 126 (a shell's "cannot execute") when it could
// not run it.
func Main(args []string) int {
	if len(args) == 1 && args[0] == probeArg {
		return probe()
	}
	code, err := launch(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "nanobot sandbox: %v\n", err)
		return 126
	}
	return code
}

func launch(args []string) (int, error) {
	if len(args) < 2 {
		return 0, fmt.Errorf("usage: nanobot %s POLICY-JSON COMMAND [ARG...]", LauncherArg)
	}
	var p Policy
	if err := json.Unmarshal([]byte(args[0]), &p); err != nil {
		return 0, fmt.Errorf("policy: %w", err)
	}
	path, err := exec.LookPath(args[1])
	if err != nil {
		return 0, err
	}
	return restrictAndRun(p, path, args[1:], os.Environ())
}

// Grant is one Landlock rule after carving: a hierarchy (or a single file)
// and whether it may be changed.
type Grant struct {
	Path  string
	Write bool
	File  bool
	// List grants only listing the directory: it was carved, and what
	// may be reached below it is granted entry by entry.
	List bool
}

// Grants turns p into the rules to apply: every hierarchy that holds no
// protected path whole, the others entry by entry without the protected
// ones. Symbolic links met while carving are skipped, never followed: one
// planted in the workspace must not grant what it points to. In a carved
// directory no entry can be made or removed at its top level (Landlock
// rights reach everything below a directory); that costs little when the
// protected path is deep (/etc/nanobot), and is why sessions live outside
// the workspace.
func (p Policy) Grants() []Grant {
	// A protected path that does not exist (yet) has nothing to protect;
	// carving around it would only cost the workspace's top directory.
	// The launcher runs per command, so one made later is protected then.
	// Both sides are compared as real paths: /lib may be a link to
	// /usr/lib, the data dir a link to another disk.
	var protected []string
	for _, pr := range p.Protected {
		if real, err := filepath.EvalSymlinks(pr); err == nil {
			protected = append(protected, real)
		}
	}
	var out []Grant
	add := func(path string, write bool) {
		real, err := filepath.EvalSymlinks(path)
		if err != nil {
			return // a missing system directory (/lib32) is not an error
		}
		fi, err := os.Stat(real)
		if err != nil {
			return
		}
		out = append(out, carve(real, fi.IsDir(), write, protected)...)
	}
	for _, d := range p.ReadOnly {
		add(d, false)
	}
	for _, d := range p.ReadWrite {
		add(d, true)
	}
	for _, e := range p.Expose {
		add(e.Path, e.Write)
	}
	for _, d := range p.Devices {
		if _, err := os.Stat(d); err == nil {
			out = append(out, Grant{Path: d, Write: true, File: true})
		}
	}
	return out
}

// carve grants path unless a protected path is at or above it (nothing) or
// below it (each entry, recursively).
func carve(path string, isDir, write bool, protected []string) []Grant {
	var inside []string
	for _, pr := range protected {
		switch {
		case pr == path || within(path, pr):
			return nil
		case within(pr, path):
			inside = append(inside, pr)
		}
	}
	if len(inside) == 0 || !isDir {
		return []Grant{{Path: path, Write: write, File: !isDir}}
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil
	}
	// The directory itself may be listed (ls works; the names of the
	// protected entries show, not their content), but not changed: a right
	// to make or remove entries would reach the protected ones too.
	out := []Grant{{Path: path, List: true}}
	for _, e := range entries {
		if e.Type()&os.ModeSymlink != 0 {
			continue
		}
		out = append(out, carve(filepath.Join(path, e.Name()), e.IsDir(), write, inside)...)
	}
	return out
}

// within reports whether path lies strictly below dir.
func within(path, dir string) bool {
	return strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}
