package daemon

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/channels/kinds"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/logging"
	"github.com/nanobot-go/nanobot/internal/sandbox"
	"github.com/nanobot-go/nanobot/internal/tools"
)

// SandboxState is what tools.exec.sandbox means on this kernel (for
// status and doctor, which say what the gateway will do).
func SandboxState(cfg *config.Config) sandbox.State {
	return sandbox.Resolve(cfg.Tools.Exec.Sandbox, sandbox.ABI(), cfg.Tools.Exec.Network)
}

// execSandbox fills the sandbox part of the exec tool's options and logs,
// once, when commands will not be confined (docs/tools.md#sandbox).
func execSandbox(cfg *config.Config, dataDir string, opts *tools.ExecOptions, log *zap.Logger) error {
	st := SandboxState(cfg)
	switch {
	case st.Refuse != "":
		log.Error(st.Refuse, zap.String("fix", st.Fix))
		opts.Refuse = st.Refuse + " (" + st.Fix + ")"
		return nil
	case !st.Confined:
		log.Warn(st.Warning, zap.String("fix", st.Fix))
		return nil
	case st.NetworkUnenforced:
		log.Warn("tools.exec.network is false, but this kernel's Landlock has no TCP rules (ABI 4, Linux 6.7): commands keep the network",
			zap.Int("landlock_abi", st.ABI))
	}
	var expose []sandbox.Path
	for _, x := range cfg.Tools.Exec.Expose {
		if _, err := os.Stat(x.Path); err != nil {
			log.Warn("tools.exec.expose: path skipped", zap.String("path", x.Path), zap.Error(err))
			continue
		}
		expose = append(expose, sandbox.Path{Path: x.Path, Write: x.Mode == "rw"})
	}
	policy, err := sandbox.NewPolicy(cfg.Agents.Workspace, expose, protectedPaths(cfg, dataDir), cfg.Tools.Exec.Network)
	if err != nil {
		return err
	}
	policy.ConnectPorts = connectPorts(cfg)
	l, err := sandbox.NewLauncher(policy)
	if err != nil {
		return err
	}
	opts.Confiner = l
	fields := []zap.Field{zap.Int("landlock_abi", st.ABI), zap.Bool("network", cfg.Tools.Exec.Network),
		zap.Int("exposed", len(expose)), zap.String("processes", l.Isolation())}
	if cfg.Tools.Exec.Network && st.ABI >= 4 {
		fields = append(fields, zap.Any("connect_ports", policy.ConnectPorts))
	}
	log.Info("exec: commands run in the Landlock sandbox", fields...)
	if cfg.Tools.Exec.Network && st.ABI < 4 {
		log.Warn("this kernel's Landlock has no TCP rules (ABI 4, Linux 6.7): commands may connect to any port, "+
			"the daemon's own on loopback too (gateway, NATS)", zap.Int("landlock_abi", st.ABI))
	}
	if l.Isolation() == sandbox.IsolationSubreaper {
		log.Warn("exec: no PID namespace for commands (user namespaces off, or RestrictNamespaces): a command's "+
			"processes are stopped by the launcher, but one killed with the daemon (kill -9) may survive it",
			zap.String("processes", l.Isolation()))
	}
	return nil
}

// webPorts are the TCP ports confined commands may connect to with
// tools.exec.network on: the web's, so that curl, git, pip and npm work.
var webPorts = []int{80, 443}

// connectPorts are the ports of webPorts and tools.exec.connect_ports,
// less the daemon's own services (gateway.listen, the NATS servers of
// bus.nats.url) unless the user listed them in connect_ports: Landlock
// cannot tell loopback from a remote host, so a web port the gateway
// itself listens on would open the gateway to commands.
func connectPorts(cfg *config.Config) []uint16 {
	own := daemonPorts(cfg)
	var out []uint16
	add := func(p int) {
		if p > 0 && p < 65536 && !slices.Contains(out, uint16(p)) {
			out = append(out, uint16(p))
		}
	}
	for _, p := range webPorts {
		if !slices.Contains(own, p) {
			add(p)
		}
	}
	for _, p := range cfg.Tools.Exec.ConnectPorts {
		add(p)
	}
	return out
}

// daemonPorts are the TCP ports of the services the daemon runs or uses
// on this machine or another: the gateway's listener and NATS.
func daemonPorts(cfg *config.Config) []int {
	var out []int
	if _, p, err := net.SplitHostPort(cfg.Gateway.Listen); err == nil {
		if n, err := strconv.Atoi(p); err == nil {
			out = append(out, n)
		}
	}
	if cfg.Bus.Backend == "nats" || cfg.Bus.NATS.URL != "" {
		for _, raw := range strings.Split(cfg.Bus.NATS.URL, ",") {
			u, err := url.Parse(strings.TrimSpace(raw))
			if err != nil || u.Host == "" {
				continue
			}
			port := u.Port()
			if port == "" {
				port = "4222" // the NATS default
			}
			if n, err := strconv.Atoi(port); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// dataFiles are the names the daemon keeps (or may keep) in the data dir;
// they are protected even before they exist.
// Each channel's own are its row's StateFiles (dataFiles adds them).
var daemonFiles = []string{"config.yaml", WebTokenFile, webConversationsFile, PairingFile, "sessions",
	filepath.Dir(CronJobsFile), filepath.Dir(HeartbeatStateFile), SessionsMovedFile}

// dataFiles are daemonFiles and every channel's state files.
func dataFiles() []string {
	out := slices.Clone(daemonFiles)
	for _, k := range kinds.All {
		out = append(out, k.StateFiles...)
	}
	return out
}

// protectedPaths are what no command may reach, whatever the sandbox grants
// around them: the data dir (config, web token, pairing, journals,
// sessions, each channel's StateFiles), the sessions wherever they are, the
// NATS credentials and what each channel's row adds (Protect). When
// the data dir holds the workspace (the default, ~/.nanobot/workspace),
// every other entry of it is protected; when it is the workspace, the
// daemon's own files in it are.
func protectedPaths(cfg *config.Config, dataDir string) []string {
	out := []string{
		cfg.Agents.SessionsDir,
		filepath.Join(cfg.Agents.Workspace, "sessions"),
		cfg.Bus.NATS.CredsFile, cfg.Bus.NATS.TLS.KeyFile,
	}
	// What each channel's row says it keeps outside the data dir.
	for _, k := range kinds.All {
		if k.Protect != nil {
			out = append(out, k.Protect(cfg)...)
		}
	}
	if dataDir == "" {
		return out
	}
	data, _ := filepath.Abs(dataDir)
	ws, _ := filepath.Abs(cfg.Agents.Workspace)
	for _, n := range dataFiles() {
		out = append(out, filepath.Join(data, n))
	}
	if !strings.HasPrefix(ws, strings.TrimSuffix(data, "/")+"/") {
		if ws != data {
			out = append(out, data)
		}
		return out
	}
	entries, _ := os.ReadDir(data)
	first, _, _ := strings.Cut(strings.TrimPrefix(ws, strings.TrimSuffix(data, "/")+"/"), "/")
	for _, e := range entries {
		if e.Name() != first {
			out = append(out, filepath.Join(data, e.Name()))
		}
	}
	return out
}

// SecretFiles are the files whose content is a secret the daemon holds:
// the web login token (when channels.web.token does not set it), the
// secrets overlay, each channel's SecretFiles, the NATS credentials and the
// NATS TLS key.
func SecretFiles(cfg *config.Config, dataDir string) []string {
	var out []string
	if cfg.Channels.Web.Token == "" && dataDir != "" {
		out = append(out, filepath.Join(dataDir, WebTokenFile))
	}
	if dataDir != "" {
		// Keys pasted on the setup page while the daemon runs.
		out = append(out, filepath.Join(dataDir, config.SecretsFile))
		// A channel's own (a login's token it keeps).
		for _, k := range kinds.All {
			for _, n := range k.SecretFiles {
				out = append(out, filepath.Join(dataDir, n))
			}
		}
	}
	return append(out, cfg.Bus.NATS.CredsFile, cfg.Bus.NATS.TLS.KeyFile)
}

// Secrets are every secret the daemon holds, for redaction and for
// scrubbing commands' environment: the config's (config.Secrets) and those
// of SecretFiles as they are now.
func Secrets(cfg *config.Config, dataDir string) []string {
	return logging.NewSecrets(cfg.Secrets(), SecretFiles(cfg, dataDir)).Values()
}

// ExecSandboxLine says how the exec tool's commands run: the mode in
// effect, the kernel's Landlock ABI and the network rule (status, doctor).
func ExecSandboxLine(cfg *config.Config) string {
	e := cfg.Tools.Exec
	if !e.Enabled {
		return "exec tool disabled"
	}
	st := SandboxState(cfg)
	line := st.Describe()
	switch {
	case st.Confined && !e.Network && st.NetworkUnenforced:
		line += ", network off requested but not enforceable (Landlock ABI < 4)"
	case st.Confined && !e.Network:
		line += ", network off"
	case st.Confined:
		line += ", network on"
	}
	if n := len(e.Expose); n > 0 && st.Confined {
		line += fmt.Sprintf(", %d exposed path(s)", n)
	}
	return line
}
