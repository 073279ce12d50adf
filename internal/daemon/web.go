package daemon

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/channels/kinds"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/schedule"
	"github.com/nanobot-go/nanobot/internal/session"
	"github.com/nanobot-go/nanobot/internal/web"
)

// Files of the web page's state in the data dir.
const (
	// WebTokenFile holds the login token when channels.web.token is empty.
	WebTokenFile = "web-token"
	// webConversationsFile lists the page's conversations and their titles.
	webConversationsFile = "web-conversations.json"
)

// buildWeb adds the browser chat and control panel when they are enabled
// and may be served on gateway.listen (loopback, or allow_remote).
func (g *Gateway) buildWeb() error {
	wc := g.cfg.Channels.Web
	served, why := wc.WebServed(g.cfg.Gateway.Listen)
	if !served {
		if why != "" {
			g.log.Warn(why)
		}
		return nil
	}
	var sessions web.Sessions = g.core.Sessions
	if g.core.NATS != nil {
		// Other processes' agents write these sessions
		// (docs/scale-out.md#subjects-and-streams).
		sessions = freshSessions{g.core.Sessions}
	}
	deps := web.Deps{
		Bus: g.core.Pub, Sessions: sessions, Workspace: g.cfg.Agents.Workspace,
		StateFile: filepath.Join(g.opts.DataDir, webConversationsFile),
		TokenFile: filepath.Join(g.opts.DataDir, WebTokenFile),
		Panel:     g.panel(),
	}
	if g.opts.Role == RoleAll {
		// The setup view puts a new key in this process's providers; a
		// split channels process has no agent to give it to.
		deps.Setup = webSetup{g}
	}
	srv := web.New(wc, deps, g.log.Named("web"))
	if err := g.manager.RegisterReceiver(web.Channel, srv); err != nil {
		return fmt.Errorf("channels.web: %w", err)
	}
	g.handle("/", "web chat and control panel", srv.Handler())
	g.web = srv
	g.links.srv, g.links.pairing = srv, g.pairing
	return nil
}

// startWeb makes sure there is a login token (creating the token file the
// first time) and says where the page is. It runs in Run, not in the
// constructor, because it writes a file.
func (g *Gateway) startWeb(addr net.Addr) {
	if g.web == nil {
		return
	}
	wc := g.cfg.Channels.Web
	if wc.Token == "" {
		path := filepath.Join(g.opts.DataDir, WebTokenFile)
		created, err := web.EnsureTokenFile(path)
		switch {
		case err != nil:
			g.log.Error("web token file could not be created; web logins will fail until `nanobot web token --rotate` makes one",
				zap.String("path", path), zap.Error(err))
		case created:
			g.log.Info("web login token created; `nanobot web token` shows it", zap.String("path", path))
		}
	}
	url := strings.TrimSuffix(wc.PublicURL, "/")
	if url == "" {
		url = "http://" + addr.String()
	}
	g.links.base = url
	g.log.Info("web page", zap.String("url", url+"/"))
	if g.core.Providers.NeedsKey() && g.opts.Role == RoleAll {
		// First run: the person who just started the gateway in a terminal
		// opens this and lands on the setup view, no token to copy. The
		// link works once, for 10 minutes; `nanobot web token` still works.
		g.log.Warn("no model key yet: open this link to set one up on the web page (it works once, for 10 minutes)",
			zap.String("url", url+"/#login="+g.web.IssueLink()))
	}
	host, _, _ := net.SplitHostPort(g.cfg.Gateway.Listen)
	if !config.IsLoopback(host) && !strings.HasPrefix(wc.PublicURL, "https://") {
		g.log.Warn("the web page is served on a non-loopback address without TLS: tokens and cookies cross the network in clear; " +
			"put it behind a TLS reverse proxy and set channels.web.public_url to its https:// address (docs/web.md)")
	}
}

// panel gathers what the control panel shows from the gateway's parts.
func (g *Gateway) panel() *web.Panel {
	cfg := g.cfg
	routes := make(map[string]string, len(cfg.Routes))
	for name, r := range cfg.Routes {
		routes[name] = r.Model
	}
	p := &web.Panel{
		Version: g.opts.Version, Started: g.started,
		Model: cfg.Agents.Model, Fallbacks: cfg.Agents.Fallbacks, Routes: routes,
		Budget:    historyBudget(cfg),
		HighWater: cfg.History.HighWater, LowWater: cfg.History.LowWater,
		Workspace: cfg.Agents.Workspace,
		Channels:  g.channelStates,
		MCP:       g.mcpStates,
		Ledger:    g.core.Usage,
		Pairing:   g.pairing,
	}
	if g.cron != nil {
		p.Cron = cronJobs{g.cron}
	}
	return p
}

func (g *Gateway) channelStates() []web.ChannelState {
	out := make([]web.ChannelState, 0, len(g.channels)+1)
	for _, c := range g.channels {
		st := web.ChannelState{Name: c.name, Up: true}
		if err := c.Healthy(); err != nil {
			st.Up, st.Error = false, g.secrets.Redact(err.Error())
		}
		out = append(out, st)
	}
	return append(out, web.ChannelState{Name: web.Channel, Up: true})
}

func (g *Gateway) mcpStates() []web.MCPState {
	sts := g.core.MCP.Status()
	out := make([]web.MCPState, 0, len(sts))
	for _, s := range sts {
		out = append(out, web.MCPState{Name: s.Name, Transport: s.Transport, State: string(s.State), Tools: s.Tools,
			Error: g.secrets.Redact(s.LastError)})
	}
	return out
}

// cronJobs shows the scheduler's jobs to the panel.
type cronJobs struct{ c *schedule.Cron }

func (j cronJobs) All() ([]web.CronJob, error) {
	jobs, err := j.c.All()
	if err != nil {
		return nil, err
	}
	out := make([]web.CronJob, 0, len(jobs))
	for _, job := range jobs {
		out = append(out, web.CronJob{ID: job.ID, Session: job.Chat.Key(), Schedule: job.Schedule.Describe(),
			Message: job.Message, NextRun: job.NextRun, Runs: job.Runs})
	}
	return out, nil
}

func (j cronJobs) Remove(id string) (bool, error) {
	jobs, err := j.c.All()
	if err != nil {
		return false, err
	}
	for _, job := range jobs {
		if job.ID == id {
			if _, err := j.c.Remove(job.Chat.Key(), id); err != nil {
				return false, err
			}
			return true, nil
		}
	}
	return false, nil
}

// webLinks answers /web: a one-time login link for an allowed user, in a
// direct message only (a link posted in a group would let the group in).
// srv and base are set before the agent runs and never change after.
type webLinks struct {
	cfg     *config.Config
	srv     *web.Server
	pairing channels.Pairing
	base    string
}

func (l *webLinks) answer(m bus.InboundMessage) string {
	switch {
	case l.srv == nil || l.base == "":
		return "The web page is not served by this gateway (see channels.web in docs/web.md)."
	case m.Channel == web.Channel:
		return "You are already in the web page."
	case m.Group != "":
		return "For safety I send login links only in a direct message: write /web to me privately."
	case !l.allowed(m):
		return "Only users listed in allow_from (or approved by pairing) get a web login link."
	}
	return fmt.Sprintf("Open this link within 10 minutes to log in to the web page (it works once):\n%s/#login=%s",
		l.base, l.srv.IssueLink())
}

// allowed reports whether m's sender is let in by name: listed in the
// channel's allow_from (not merely by "*") or approved by pairing.
func (l *webLinks) allowed(m bus.InboundMessage) bool {
	k, ok := kinds.ByName(m.Channel)
	if !ok {
		return false
	}
	if allowedByName(k.Access(l.cfg).AllowFrom, m.SenderID) {
		return true
	}
	if l.pairing == nil { // no web page built: only the lists say
		return false
	}
	ok, err := l.pairing.IsApproved(m.Channel, m.SenderID)
	return err == nil && ok
}

// freshSessions reads a session as it is now: on the NATS bus an agent
// worker in another process may have written it since this process cached
// it, and the page must never show a stale copy (the channels process
// showed 2 of 4 messages; see docs/scale-out.md#subjects-and-streams). Forget
// costs one request to the stream when nothing is new; with shared-volume
// files, it rereads the file.
type freshSessions struct{ Sessions }

func (f freshSessions) Get(key string) (session.Snapshot, error) {
	if err := f.Forget(key); err != nil {
		return session.Snapshot{}, err
	}
	return f.Sessions.Get(key)
}

// historyBudget is the projection budget the panel shows levels for: the
// default model's window less the reply, or history.budget when lower (the
// agent also takes the tool list off).
func historyBudget(cfg *config.Config) int {
	b := cfg.Agents.ContextWindow - cfg.Agents.MaxTokens
	if h := cfg.History.Budget; h > 0 && h < b {
		return h
	}
	return b
}
