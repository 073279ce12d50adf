package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/bus/natsbus"
	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/channels/kinds"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/mcp"
	"github.com/nanobot-go/nanobot/internal/session/jsstore"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

// checkDirs checks that the workspace, the sessions dir and the data dir
// (pairing store, Telegram update journal) are writable by this user, and
// that no old sessions/ is left in the workspace.
func checkDirs(r *Report, cfg *config.Config, data string) {
	ws := cfg.Agents.Workspace
	switch fi, err := os.Stat(ws); {
	case errors.Is(err, os.ErrNotExist):
		r.add("workspace", VerdictWarn, ws+" does not exist yet; the gateway creates it from the template on start",
			"run `nanobot onboard` to create it now")
	case err != nil:
		r.add("workspace", VerdictFail, err.Error(), "fix the path in agents.workspace")
	case !fi.IsDir():
		r.add("workspace", VerdictFail, ws+" is not a directory", "point agents.workspace at a directory")
	default:
		if err := writable(ws); err != nil {
			r.add("workspace", VerdictFail, err.Error(), ownFix(ws))
		} else {
			r.add("workspace", VerdictOK, ws+" is writable", "")
		}
	}
	checkSessionsDir(r, cfg, data)
	checkWorkspaceFiles(r, ws)
	if err := writable(data); err != nil {
		s := VerdictWarn
		if slices.ContainsFunc(kinds.All, func(k channels.Kind) bool { return k.Enabled(cfg) }) {
			s = VerdictFail // the update journal and pairing store live there
		}
		r.add("data dir", s, err.Error(), ownFix(data))
	} else {
		r.add("data dir", VerdictOK, data+" is writable", "")
	}
}

// checkSessionsDir checks that agents.sessions_dir is (or can be created)
// writable, and warns about an old <workspace>/sessions/ the gateway has not
// moved yet, or could not move whole: there the tools can reach it. After
// the one-time move (SessionsMovedFile in data) one is never imported.
func checkSessionsDir(r *Report, cfg *config.Config, data string) {
	dir := cfg.Agents.SessionsDir
	// The store creates the directory on the first write: what must be
	// writable is the directory or, before then, its nearest parent.
	probe := dir
	for !isDir(probe) && filepath.Dir(probe) != probe {
		probe = filepath.Dir(probe)
	}
	switch err := writable(probe); {
	case err != nil:
		r.add("sessions dir", VerdictFail, err.Error(), ownFix(probe))
	case probe != dir:
		r.add("sessions dir", VerdictOK, dir+" does not exist yet; it is created on the first message", "")
	default:
		r.add("sessions dir", VerdictOK, dir+" is writable", "")
	}
	old := filepath.Join(cfg.Agents.Workspace, workspace.SessionsDir)
	if fi, err := oldSessions(cfg.Agents.Workspace); err == nil {
		if fi.Mode()&os.ModeSymlink != 0 {
			r.add("old sessions", VerdictWarn, old+" is a link in the workspace; the gateway never follows it (a command may have planted it)",
				"remove the link; if it led to real session files, move them into "+dir+" by hand")
		} else if _, err := os.Stat(sessionsMovedPath(data)); data != "" && err == nil {
			r.add("old sessions", VerdictWarn, old+" is a directory in the workspace after the one-time move of old sessions; the gateway does not import it (the move left it, or a command planted it)",
				"move real session files into "+dir+" by hand, then delete "+old)
		} else {
			r.add("old sessions", VerdictWarn, old+" is still a directory in the workspace, where tools may reach it",
				"start the gateway: it moves the session files to "+dir+" at start (its log says what it left; move or delete that by hand)")
		}
	}
}

// oldSessions returns what is at sessions/ in the workspace ws, not
// following a link, through the daemon's workspace access.
func oldSessions(ws string) (os.FileInfo, error) {
	files, err := workspace.OpenFiles(ws, nil)
	if err != nil {
		return nil, err
	}
	defer files.Close()
	return files.OldSessions()
}

// checkWorkspaceFiles reports every file the daemon reads or writes in the
// workspace (workspace.DaemonFiles) that it would refuse: a link out of the
// workspace, a FIFO or device, a file over its cap, a prompt file that is
// not UTF-8, a directory where a file belongs. The gateway leaves such a
// file out (one log line) and goes on; doctor says which and why.
func checkWorkspaceFiles(r *Report, ws string) {
	files, err := workspace.OpenFiles(ws, nil)
	if err != nil {
		return // checkDirs reports the workspace itself
	}
	defer files.Close()
	found := files.Inspect()
	for _, f := range found {
		r.add("workspace file", VerdictWarn, fmt.Sprintf("%s is %s; the daemon leaves it out (%s)", f.Path, f.Problem, f.Use),
			"replace "+f.Path+" with a regular UTF-8 file inside the workspace (a command the model ran may have planted it)")
	}
	if len(found) == 0 {
		r.add("workspace files", VerdictOK, "every file the daemon reads or writes in the workspace is a regular file within its cap", "")
	}
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// writable creates and removes a file in each dir.
func writable(dirs ...string) error {
	for _, d := range dirs {
		f, err := os.CreateTemp(d, ".nanobot-doctor-*")
		if err != nil {
			return fmt.Errorf("%s is not writable: %w", d, err)
		}
		name := f.Name()
		_ = f.Close()
		if err := os.Remove(name); err != nil {
			return fmt.Errorf("%s: cannot remove a file: %w", d, err)
		}
	}
	return nil
}

func ownFix(dir string) string {
	return fmt.Sprintf("make %s writable by the user running nanobot (e.g. `sudo chown -R $(id -un) %s`)", dir, dir)
}

// checkListen reports whether gateway.listen is free, or already served by
// a running gateway (which is fine).
func checkListen(ctx context.Context, r *Report, addr string) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		_ = ln.Close()
		r.add("gateway.listen", VerdictOK, addr+" is free", "")
		return
	}
	if probeHealthz(ctx, addr) {
		r.add("gateway.listen", VerdictOK, addr+" is served by a running nanobot gateway", "")
		return
	}
	r.add("gateway.listen", VerdictFail, fmt.Sprintf("cannot listen on %s: %v", addr, err),
		"stop the program using that port, or choose another address in gateway.listen")
}

// checkBus reaches the NATS server of bus.backend: nats and looks for the
// streams (docs/scale-out.md).
func checkBus(ctx context.Context, r *Report, cfg *config.Config) {
	if cfg.Bus.Backend != config.BusNATS {
		return
	}
	nc, err := natsbus.Dial(cfg.Bus.NATS, "nanobot doctor")
	if err != nil {
		r.add("bus.nats", VerdictFail, fmt.Sprintf("cannot reach NATS at %s: %v", cfg.Bus.NATS.URL, err),
			"start a NATS server with JetStream (nats-server -js), or fix bus.nats.url, creds_file and tls")
		return
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var more []string
	if cfg.Bus.NATS.Sessions == config.SessionsJetStream {
		more = append(more, jsstore.StreamName(cfg.Bus.NATS.Prefix))
	}
	if err := natsbus.Check(ctx, nc, cfg.Bus.NATS, more...); err != nil {
		r.add("bus.nats", VerdictWarn, fmt.Sprintf("connected to %s, but: %v", nc.ConnectedUrlRedacted(), err),
			"the first gateway process creates the streams (the sessions stream: the first agent worker's first turn); "+
				"if one runs, check that JetStream is enabled (nats-server -js)")
		return
	}
	leader := "no process holds the scheduler lease (cron and heartbeat run nowhere until an agent process starts)"
	switch holder, err := natsbus.LeaseHolder(ctx, nc, cfg.Bus.NATS, natsbus.SchedulerLease); {
	case err != nil:
		leader = fmt.Sprintf("scheduler lease unreadable: %v", err)
	case holder != "":
		leader = "cron and heartbeat run on " + holder
	}
	r.add("bus.nats", VerdictOK, "connected to "+nc.ConnectedUrlRedacted()+"; streams present; "+leader, "")
}

func probeHealthz(ctx context.Context, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	body, err := Probe(ctx, addr, "/healthz")
	return err == nil && strings.TrimSpace(body) == "ok"
}

// checkProviders calls every provider a route uses once.
func checkProviders(ctx context.Context, r *Report, cfg *config.Config) {
	used := usedModels(cfg)
	hc := &http.Client{}
	defer hc.CloseIdleConnections()
	for _, name := range sortedKeys(cfg.Providers) {
		pc := cfg.Providers[name]
		label := "provider " + name
		models, isUsed := used[name]
		if !isUsed {
			r.add(label, VerdictSkip, "not used by agents.model, agents.fallbacks or any route", "")
			continue
		}
		if problem := cfg.ProviderProblem(name); problem != "" {
			r.add(label, VerdictFail, problem, "give "+label+" its key: "+keyHint(name, cfg.KeyVar(name))+
				" (the gateway starts without it; the page's setup view takes it)")
			continue
		}
		p, err := newProvider(name, pc, hc, zap.NewNop())
		if err != nil {
			r.add(label, VerdictFail, err.Error(), "set providers."+name+".kind to one of "+strings.Join(config.ProviderKinds, ", "))
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, doctorTimeout)
		ids, err := p.Models(cctx)
		cancel()
		if err != nil {
			s, fix := providerFix(name, pc, err)
			r.add(label, s, err.Error(), fix)
			continue
		}
		r.add(label, VerdictOK, fmt.Sprintf("reachable, key accepted (%d models listed)", len(ids)), "")
		for _, m := range models {
			if !slices.Contains(ids, m) {
				r.add(label, VerdictWarn, fmt.Sprintf("model %q is not in the list the server returned", m),
					fmt.Sprintf("check the spelling of %s/%s (for Ollama: `ollama pull %s`); some servers list only part of what they serve", name, m, m))
			}
		}
	}
}

// providerFix chooses the verdict and advice for a failed model listing,
// by the failure's kind (llm.Policies).
func providerFix(name string, pc config.ProviderConfig, err error) (Verdict, string) {
	key := "providers." + name + ".api_key"
	f := llm.Classify(err)
	var api *llm.APIError
	switch {
	case f.Kind == llm.KindAuth:
		if pc.APIKey == "" {
			return VerdictFail, "set " + key + " (e.g. api_key: ${" + strings.ToUpper(name) + "_API_KEY} and export the variable)"
		}
		return VerdictFail, "the key was refused: put a valid key in " + key + " (or the variable it names)"
	case f.Kind == llm.KindQuota:
		return VerdictFail, "the account's quota or billing is exhausted: check it on the provider's website"
	case f.Kind == llm.KindRateLimit:
		return VerdictFail, "the provider is rate-limiting this key: try again in a minute"
	case errors.As(err, &api) && api.Status == http.StatusNotFound:
		return VerdictWarn, "the server has no model list at " + pc.BaseURL + "/models, so the key could not be checked; " +
			"if chats fail, check providers." + name + ".base_url"
	case f.Health == llm.SignalDown, f.Kind == llm.KindDeadline:
		return VerdictFail, "cannot reach " + orDefaultURL(pc) + ": check providers." + name + ".base_url, the network and any proxy"
	}
	return VerdictFail, "check providers." + name + " (base_url, api_key, extra_headers)"
}

func orDefaultURL(pc config.ProviderConfig) string {
	if pc.BaseURL != "" {
		return pc.BaseURL
	}
	return "the provider's default URL"
}

// usedModels maps each provider name that agents.model, agents.fallbacks or
// a route refers to, to the model ids used on it.
func usedModels(cfg *config.Config) map[string][]string {
	used := map[string][]string{}
	add := func(ref string) {
		if rc, ok := cfg.Routes[ref]; ok {
			ref = rc.Model
		}
		prov, model, ok := strings.Cut(ref, "/")
		if !ok || prov == "" {
			return
		}
		if !slices.Contains(used[prov], model) {
			used[prov] = append(used[prov], model)
		}
	}
	add(cfg.Agents.Model)
	for _, f := range cfg.Agents.Fallbacks {
		add(f)
	}
	for _, name := range sortedKeys(cfg.Routes) {
		add(cfg.Routes[name].Model)
		for _, f := range cfg.Routes[name].Fallbacks {
			add(f)
		}
	}
	return used
}

// checkChannels calls each enabled channel's "who am I" once with its
// token, on the adapter the gateway would run.
func checkChannels(ctx context.Context, r *Report, cfg *config.Config, data string) {
	// The adapters need a bus; nothing is published in a check.
	parts := channelParts{pub: bus.New(1), pairing: channels.NewPairingStore(filepath.Join(data, PairingFile)), dataDir: data}
	for _, k := range kinds.All {
		label := "channel " + k.Name
		if !k.Enabled(cfg) {
			r.add(label, VerdictSkip, "disabled", "")
			continue
		}
		if problem := cfg.ChannelProblem(k.Name); problem != "" {
			r.add(label, VerdictFail, problem, k.Fix+" (the gateway starts without it; the channel stays down)")
			continue
		}
		c, err := newAdapter(cfg, k, parts, zap.NewNop())
		if err != nil {
			r.add(label, VerdictFail, err.Error(), "fix channels."+k.Name+" in the config")
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, doctorTimeout)
		who, err := c.Check(cctx)
		cancel()
		switch {
		case err == nil:
			r.add(label, VerdictOK, "token accepted: "+who, "")
		case errors.Is(err, channels.ErrTokenRefused):
			r.add(label, VerdictFail, err.Error(), k.Fix)
		default:
			r.add(label, VerdictFail, err.Error(),
				"cannot reach the platform: check channels."+k.Name+".api_url, the network and any proxy")
		}
	}
}

// checkMCP starts each enabled MCP server as the gateway would (a stdio
// server as a child process, stopped and reaped afterwards), lists its tools
// and disconnects.
func checkMCP(ctx context.Context, r *Report, cfg *config.Config, version string) {
	opts := mcp.Options{ConnectTimeout: doctorTimeout, Workspace: cfg.Agents.Workspace, Secrets: cfg.Secrets(), Version: version}
	for _, name := range sortedKeys(cfg.Tools.MCPServers) {
		sc := cfg.Tools.MCPServers[name]
		label := "mcp " + name
		if sc.Disabled {
			r.add(label, VerdictSkip, "disabled", "")
			continue
		}
		key := "tools.mcp_servers." + name
		kind, fix := "stdio", "run the command by hand to see why it fails ("+strings.Join(append([]string{sc.Command}, sc.Args...), " ")+
			"), then fix "+key+".command, args, env or cwd"
		if sc.URL != "" {
			kind, fix = "http", "check that the server runs and answers at "+key+".url, and its headers (e.g. an Authorization token)"
		}
		names, skipped, err := mcp.Probe(ctx, name, sc, opts, zap.NewNop())
		switch {
		case err != nil:
			r.add(label, VerdictFail, kind+": "+err.Error(), fix)
		case len(names) == 0:
			r.add(label, VerdictWarn, kind+": connected, but it offers no tools nanobot can use", "check "+key+".enabled_tools against the server's tool names")
		case skipped > 0:
			r.add(label, VerdictWarn, fmt.Sprintf("%s: %d tools, %d skipped (see the gateway log)", kind, len(names), skipped), "")
		default:
			r.add(label, VerdictOK, fmt.Sprintf("%s: %d tools: %s", kind, len(names), firstNames(names, 5)), "")
		}
	}
}

// firstNames lists up to n names, and "…" when there are more.
func firstNames(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:n], ", ") + ", …"
}

// checkSandbox says whether the exec tool's commands will be confined by
// Landlock (docs/tools.md#sandbox), and what to do when they will not.
func checkSandbox(r *Report, cfg *config.Config) {
	const name = "exec sandbox"
	if !cfg.Tools.Exec.Enabled {
		r.add(name, VerdictSkip, "the exec tool is disabled", "")
		return
	}
	st := SandboxState(cfg)
	switch {
	case st.Refuse != "":
		r.add(name, VerdictFail, st.Refuse, st.Fix)
	case !st.Confined:
		r.add(name, VerdictWarn, st.Warning, st.Fix)
	case st.NetworkUnenforced:
		r.add(name, VerdictWarn, fmt.Sprintf("Landlock ABI %d confines commands, but tools.exec.network: false needs ABI 4 (Linux 6.7): commands keep the network", st.ABI),
			"run a newer kernel, or accept that commands may reach the network")
	default:
		r.add(name, VerdictOK, "commands run confined by Landlock: "+ExecSandboxLine(cfg), "")
	}
}
