package daemon

import (
	"path/filepath"
	"slices"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/channels/kinds"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/session"
	"github.com/nanobot-go/nanobot/internal/session/jsstore"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

// Summary is what `nanobot status` shows beyond the config's own fields:
// what the daemon's parts make of them. Building it connects to nothing.
type Summary struct {
	// OldSessions is <workspace>/sessions when it still exists (the gateway
	// moves it to agents.sessions_dir at start); else "".
	OldSessions string
	// ResponsesStore maps each provider whose kind has the store option
	// (config.ProviderKind.Options: the Responses API) to its store
	// setting ("on" or "off").
	ResponsesStore map[string]string
	// ExecSandbox is ExecSandboxLine.
	ExecSandbox string
	// SessionsStream names the JetStream stream that holds the sessions of
	// agent workers (bus.nats.sessions: jetstream); else "".
	SessionsStream string
	// Sessions are the session files in agents.sessions_dir, the most
	// recently active first; SessionsErr says why they could not be listed.
	Sessions    []session.Info
	SessionsErr error
	// Channels are the chat channels of the channel table, in its order.
	Channels []ChannelSummary
}

// ChannelSummary is one chat channel as `nanobot status` shows it.
type ChannelSummary struct {
	Name    string
	Enabled bool
	// TokenSet says whether its credential (channels.<name>.<token key>) is set.
	TokenSet bool
	Access   config.Access
}

// Summarize builds the Summary of cfg.
func Summarize(cfg *config.Config) Summary {
	s := Summary{ResponsesStore: map[string]string{}, ExecSandbox: ExecSandboxLine(cfg)}
	if fi, err := oldSessions(cfg.Agents.Workspace); err == nil && fi.IsDir() {
		s.OldSessions = filepath.Join(cfg.Agents.Workspace, workspace.SessionsDir)
	}
	for name, p := range cfg.Providers {
		if k, ok := config.LookupProviderKind(p.Kind); ok && k.Accepts("store") {
			s.ResponsesStore[name] = map[bool]string{true: "on", false: "off"}[p.Store]
		}
	}
	if cfg.Bus.Backend == config.BusNATS && cfg.Bus.NATS.Sessions == config.SessionsJetStream {
		s.SessionsStream = jsstore.StreamName(cfg.Bus.NATS.Prefix)
	}
	for _, k := range kinds.All {
		s.Channels = append(s.Channels, ChannelSummary{Name: k.Name, Enabled: k.Enabled(cfg),
			TokenSet: cfg.ChannelToken(k.Name) != "", Access: k.Access(cfg)})
	}
	store := session.NewStore(cfg.Agents.SessionsDir, session.Options{}, zap.NewNop())
	defer func() { _ = store.Close() }() // it only listed: nothing loaded, nothing to write
	s.Sessions, s.SessionsErr = store.List()
	slices.SortFunc(s.Sessions, func(a, b session.Info) int { return b.ModTime.Compare(a.ModTime) })
	return s
}
