package daemon

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/config"
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
	srv := web.New(wc, web.Deps{
		Bus: g.core.Bus, Sessions: g.core.Sessions, Workspace: g.cfg.Agents.Workspace,
		StateFile: filepath.Join(g.opts.DataDir, webConversationsFile),
		TokenFile: filepath.Join(g.opts.DataDir, WebTokenFile),
	}, g.log.Named("web"))
	if err := g.manager.RegisterReceiver(web.Channel, srv); err != nil {
		return fmt.Errorf("channels.web: %w", err)
	}
	g.mux.Handle("/", srv.Handler())
	g.web = srv
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
	url := wc.PublicURL
	if url == "" {
		url = "http://" + addr.String() + "/"
	}
	g.log.Info("web page", zap.String("url", url))
	host, _, _ := net.SplitHostPort(g.cfg.Gateway.Listen)
	if !config.IsLoopback(host) && !strings.HasPrefix(wc.PublicURL, "https://") {
		g.log.Warn("the web page is served on a non-loopback address without TLS: tokens and cookies cross the network in clear; " +
			"put it behind a TLS reverse proxy and set channels.web.public_url to its https:// address (docs/web.md)")
	}
}
