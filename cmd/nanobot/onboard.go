package main

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/daemon"
)

func newOnboardCmd(g *globalFlags) *cobra.Command {
	var ws string
	cmd := &cobra.Command{
		Use:   "onboard",
		Short: "Write a starter config and create the workspace (never overwrites a file)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			path := g.configFile()
			if ws == "" {
				ws = filepath.Join(filepath.Dir(path), "workspace")
			}
			abs, err := filepath.Abs(ws)
			if err != nil {
				return err
			}
			switch err := config.WriteStarter(path, daemon.StarterYAML(abs)); {
			case errors.Is(err, fs.ErrExist):
				fmt.Fprintf(out, "config:    %s (exists, left as is)\n", path)
			case err != nil:
				return err
			default:
				fmt.Fprintf(out, "config:    %s (created)\n", path)
			}
			tokenPath := daemon.WebTokenPath(filepath.Dir(path))
			switch made, err := daemon.EnsureWebToken(filepath.Dir(path)); {
			case err != nil:
				return err
			case made:
				fmt.Fprintf(out, "web token: %s (created, mode 0600; `nanobot web token` prints it)\n", tokenPath)
			default:
				fmt.Fprintf(out, "web token: %s (exists, left as is)\n", tokenPath)
			}
			created, err := daemon.InstallWorkspace(abs)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "workspace: %s (%s created)\n", abs, countCreated(created))
			for _, c := range created {
				fmt.Fprintf(out, "  + %s\n", c)
			}
			if isTTY(os.Stdin) {
				// A person at a terminal: ask for the key now (onboard_setup.go).
				if err := promptSetup(cmd.Context(), cmd.InOrStdin(), out, path); err != nil {
					return err
				}
			}
			self := invokedAs(os.Args[0])
			fmt.Fprintf(out, "\nNext:\n  export OPENAI_API_KEY=...   (or edit %s)\n  %s agent -m \"hello\"\n  %s gateway\n", path, self, self)
			for _, l := range pageLines(pageOf(path), inContainer(), self) {
				fmt.Fprintf(out, "  %s\n", l)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&ws, "workspace", "", "workspace directory (default: next to the config, ~/.nanobot/workspace)")
	return cmd
}

// countCreated says how many files and directories Install created (the
// directories' entries end in "/").
func countCreated(created []string) string {
	dirs := 0
	for _, c := range created {
		if strings.HasSuffix(c, "/") {
			dirs++
		}
	}
	return fmt.Sprintf("%s, %s", plural(len(created)-dirs, "file"), plural(dirs, "directory"))
}

func plural(n int, what string) string {
	switch {
	case n == 1:
		return "1 " + what
	case strings.HasSuffix(what, "y"):
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(what, "y"))
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// invokedAs is how the user ran this program, for the commands onboard
// suggests: "./nanobot" stays "./nanobot" (README builds it in the
// checkout), and a program found on PATH is its bare name.
func invokedAs(arg0 string) string {
	if !strings.ContainsRune(arg0, filepath.Separator) {
		return arg0
	}
	base := filepath.Base(arg0)
	if onPath, err := exec.LookPath(base); err == nil && sameFile(onPath, arg0) {
		return base
	}
	return arg0
}

func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

// page is what decides where the web page is served.
type page struct {
	listen      string // gateway.listen
	enabled     bool   // channels.web.enabled
	allowRemote bool   // channels.web.allow_remote
}

// pageOf reads the page's settings from the config onboard just wrote or
// found (with the environment's overrides). A config that does not load yet
// (a secret not exported) falls back to the environment and the defaults.
func pageOf(path string) page {
	if cfg, err := daemon.LoadConfig(path); err == nil {
		return page{listen: cfg.Gateway.Listen, enabled: cfg.Channels.Web.Enabled, allowRemote: cfg.Channels.Web.AllowRemote}
	}
	def := daemon.DefaultConfig()
	p := page{listen: cmp.Or(os.Getenv(config.EnvName("gateway.listen")), def.Gateway.Listen), enabled: def.Channels.Web.Enabled,
		allowRemote: def.Channels.Web.AllowRemote}
	if v, err := strconv.ParseBool(os.Getenv(config.EnvName("channels.web.enabled"))); err == nil {
		p.enabled = v
	}
	if v, err := strconv.ParseBool(os.Getenv(config.EnvName("channels.web.allow_remote"))); err == nil {
		p.allowRemote = v
	}
	return p
}

// pageLines say where the web page will be once the gateway runs. In a
// container the gateway listens on all interfaces (the image sets
// NANOBOT_GATEWAY_LISTEN=0.0.0.0:18790): the page is reached through the
// port published on the host, and is served only with allow_remote.
func pageLines(p page, container bool, self string) []string {
	if !p.enabled {
		return []string{"(the web page is off: channels.web.enabled is false)"}
	}
	host, port, err := net.SplitHostPort(p.listen)
	if err != nil {
		return nil
	}
	if config.IsLoopback(host) {
		return []string{fmt.Sprintf("then open http://%s/ (the web page; `%s web token` prints its login token)", net.JoinHostPort(hostOrLoopback(host), port), self)}
	}
	var lines []string
	if container {
		lines = append(lines, fmt.Sprintf("then open http://127.0.0.1:%s/ on the host (the port docker-compose.yml publishes there)", port))
	} else {
		lines = append(lines, fmt.Sprintf("then open http://<this host>:%s/ (the gateway listens on %s)", port, p.listen))
	}
	if !p.allowRemote {
		lines = append(lines, fmt.Sprintf("  the page is served on %s only with NANOBOT_CHANNELS_WEB_ALLOW_REMOTE=true (channels.web.allow_remote)", p.listen))
	}
	return lines
}

func hostOrLoopback(host string) string {
	if host == "" || host == "localhost" {
		return "127.0.0.1"
	}
	return host
}

// inContainer reports whether this process runs in a Docker or Podman
// container, by the files their runtimes put at the root.
func inContainer() bool {
	for _, f := range []string{"/.dockerenv", "/run/.containerenv"} {
		if _, err := os.Stat(f); err == nil {
			return true
		}
	}
	return false
}
