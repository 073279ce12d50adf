package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/daemon"
)

func newStatusCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Summarise the configuration, workspace, routes, channels and sessions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := loadConfig(g)
			if err != nil {
				return err
			}
			return printStatus(cmd.OutOrStdout(), g.configFile(), cfg)
		},
	}
}

// printStatus writes the summary. It never prints a secret: keys and tokens
// show only whether they are set.
func printStatus(out io.Writer, path string, cfg *config.Config) error {
	w := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	set := func(s string) string {
		if s == "" {
			return "not set"
		}
		return "set"
	}
	sum := daemon.Summarize(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	states := daemon.PartStates(ctx, cfg)
	cancel()
	// state is ", up" or ", DOWN: why" for a part the gateway (or the
	// config alone) says something about.
	state := func(name string) string {
		st, ok := states[name]
		switch {
		case !ok || !st.Known:
			return ""
		case st.Up:
			return ", up"
		}
		return ", DOWN: " + st.Reason
	}
	fmt.Fprintf(w, "nanobot %s\n\n", buildVersion())
	fmt.Fprintf(w, "Config\t%s\n", path)
	fmt.Fprintf(w, "Workspace\t%s\n", cfg.Agents.Workspace)
	fmt.Fprintf(w, "Sessions dir\t%s\n", cfg.Agents.SessionsDir)
	if sum.OldSessions != "" {
		fmt.Fprintf(w, "\t%s still exists: the gateway moves its session files to the sessions dir at start\n", sum.OldSessions)
	}
	fmt.Fprintf(w, "Gateway\t%s, %s\n", cfg.Gateway.Listen, gatewayState(cfg.Gateway.Listen))
	fmt.Fprintf(w, "Model\t%s\n", cfg.Agents.Model)
	if len(cfg.Agents.Fallbacks) > 0 {
		fmt.Fprintf(w, "Fallbacks\t%s\n", strings.Join(cfg.Agents.Fallbacks, ", "))
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Routes)) {
		r := cfg.Routes[name]
		fmt.Fprintf(w, "Route %s\t%s", name, r.Model)
		if len(r.Fallbacks) > 0 {
			fmt.Fprintf(w, " (fallbacks: %s)", strings.Join(r.Fallbacks, ", "))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	for _, name := range slices.Sorted(maps.Keys(cfg.Providers)) {
		p := cfg.Providers[name]
		fmt.Fprintf(w, "Provider %s\t%s at %s, api key %s", name, p.Kind, p.BaseURL, set(p.APIKey))
		if store, ok := sum.ResponsesStore[name]; ok {
			fmt.Fprintf(w, ", store %s", store)
		}
		fmt.Fprintln(w, state("provider "+name))
	}
	fmt.Fprintln(w)
	for _, c := range sum.Channels {
		if !c.Enabled {
			fmt.Fprintf(w, "Channel %s\tdisabled\n", c.Name)
			continue
		}
		token := "not set"
		if c.TokenSet {
			token = "set"
		}
		fmt.Fprintf(w, "Channel %s\tenabled, token %s, policy %s (%d allowed), groups: %s%s\n",
			c.Name, token, c.Access.Policy, len(c.Access.AllowFrom), c.Access.GroupPolicy, state(c.Name))
	}
	switch served, why := cfg.Channels.Web.WebServed(cfg.Gateway.Listen); {
	case served:
		fmt.Fprintf(w, "Channel web	http://%s/ (`nanobot web token` prints the login token)\n", cfg.Gateway.Listen)
	case why != "":
		fmt.Fprintf(w, "Channel web	not served: listen address is not loopback and allow_remote is false\n")
	default:
		fmt.Fprintf(w, "Channel web	disabled\n")
	}
	printMCP(w, cfg)
	fmt.Fprintf(w, "Exec sandbox\t%s\n", sum.ExecSandbox)
	if names := slices.Sorted(maps.Keys(cfg.API.Keys)); len(names) > 0 {
		fmt.Fprintf(w, "API	/v1/chat/completions on %s, keys: %s\n", cfg.Gateway.Listen, strings.Join(names, ", "))
	} else {
		fmt.Fprintf(w, "API	off (no api.keys)\n")
	}
	if b := cfg.Bus; b.Backend == config.BusNATS {
		fmt.Fprintf(w, "Bus\tnats at %s, prefix %s, %d partitions, sessions: %s\n", cfg.Redacted().Bus.NATS.URL, b.NATS.Prefix, b.NATS.Partitions, b.NATS.Sessions)
	} else {
		fmt.Fprintf(w, "Bus\tmemory (one process)\n")
	}
	fmt.Fprintln(w)
	if sum.SessionsStream != "" {
		// status does not connect to NATS; doctor does.
		fmt.Fprintf(w, "Sessions\tagent workers keep them in the %s stream (nanobot doctor checks it); files in the sessions dir:\n",
			sum.SessionsStream)
	}
	if sum.SessionsErr != nil {
		fmt.Fprintf(w, "Sessions\tunreadable: %v\n", sum.SessionsErr)
		return w.Flush()
	}
	infos := sum.Sessions
	var total int64
	for _, in := range infos {
		total += in.Size
	}
	fmt.Fprintf(w, "Sessions\t%d, %.1f KiB in total\n", len(infos), float64(total)/1024)
	for _, in := range infos[:min(len(infos), 5)] {
		fmt.Fprintf(w, "  %s\t%.1f KiB, last active %s\n", in.Key, float64(in.Size)/1024, in.ModTime.Format("2006-01-02 15:04"))
	}
	return w.Flush()
}

// printMCP lists the MCP servers as configured: status does not connect to
// them (the gateway does, and /status in a chat shows their live state).
func printMCP(w io.Writer, cfg *config.Config) {
	servers := cfg.Redacted().Tools.MCPServers // no password of a URL
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		s := servers[name]
		if s.Disabled {
			fmt.Fprintf(w, "MCP %s\tdisabled\n", name)
			continue
		}
		target := "http " + s.URL
		if s.URL == "" {
			target = "stdio " + strings.TrimSpace(s.Command+" "+strings.Join(s.Args, " "))
		}
		fmt.Fprintf(w, "MCP %s\tconfigured: %s", name, target)
		if len(s.EnabledTools) > 0 {
			fmt.Fprintf(w, " (tools: %s)", strings.Join(s.EnabledTools, ", "))
		}
		fmt.Fprintln(w)
	}
	if len(servers) > 0 {
		fmt.Fprintf(w, "\t(MCP servers connect when the gateway runs; /status in a chat shows their state and tools)\n")
	}
}

// gatewayState probes a gateway on listen: whether one runs there and is
// ready (channels connected, model answering).
func gatewayState(listen string) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := daemon.Probe(ctx, listen, "/healthz"); err != nil {
		return "not running"
	}
	if _, err := daemon.Probe(ctx, listen, "/readyz"); err != nil {
		return "running, not ready (`nanobot healthcheck --ready` says why)"
	}
	return "running, ready"
}
