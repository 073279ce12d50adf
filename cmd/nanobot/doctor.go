package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/daemon"
	"github.com/nanobot-go/nanobot/internal/logging"
)

// doctorTimeout bounds each network check: a provider or platform that
// takes longer is as good as unreachable for a chat bot.
const doctorTimeout = 15 * time.Second

func newDoctorCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Check the config, workspace, providers and channels, and say how to fix what is wrong",
		Long: "doctor validates the config, checks that the workspace and data directory are writable and\n" +
			"that gateway.listen is free, calls each provider that a route uses (listing its models: a cheap\n" +
			"call that proves the key is accepted) and each enabled channel (Telegram getMe, Discord\n" +
			"users/@me), and starts each enabled MCP server and lists its tools. It prints what is wrong and\n" +
			"how to fix it, and exits non-zero if anything failed.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := g.configPath
			if path == "" {
				path = config.DefaultPath()
			}
			r := &report{}
			runDoctor(cmd.Context(), r, path)
			r.print(cmd.OutOrStdout())
			if r.failures() > 0 {
				return exitError{code: 1}
			}
			return nil
		},
	}
}

// status is a finding's verdict.
type status int

const (
	statusOK status = iota
	statusSkip
	statusWarn
	statusFail
)

func (s status) String() string {
	return [...]string{"ok", "skip", "warn", "FAIL"}[s]
}

// finding is the result of one check: what was checked, what was found and,
// when something is wrong, how to fix it.
type finding struct {
	name   string
	status status
	detail string
	fix    string
}

// report collects findings; secrets are redacted from every line.
type report struct {
	findings []finding
	secrets  []string
}

func (r *report) add(name string, s status, detail, fix string) {
	r.findings = append(r.findings, finding{name, s, detail, fix})
}

func (r *report) failures() int {
	n := 0
	for _, f := range r.findings {
		if f.status == statusFail {
			n++
		}
	}
	return n
}

func (r *report) print(out io.Writer) {
	w := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintf(w, "nanobot doctor (%s)\n\n", buildVersion())
	warnings := 0
	for _, f := range r.findings {
		detail := strings.TrimSpace(logging.Redact(f.detail, r.secrets))
		fmt.Fprintf(w, "[%s]\t%s\t%s\n", f.status, f.name, strings.ReplaceAll(detail, "\n", "\n\t\t"))
		if f.fix != "" && f.status >= statusWarn {
			fmt.Fprintf(w, "\t\tfix: %s\n", logging.Redact(f.fix, r.secrets))
		}
		if f.status == statusWarn {
			warnings++
		}
	}
	_ = w.Flush()
	switch n := r.failures(); {
	case n > 0:
		fmt.Fprintf(out, "\n%d problem(s) to fix, %d warning(s).\n", n, warnings)
	case warnings > 0:
		fmt.Fprintf(out, "\nNo problems; %d warning(s).\n", warnings)
	default:
		fmt.Fprintln(out, "\nEverything looks good.")
	}
}

// runDoctor runs every check in order. Checks after the config need a valid
// config, so an invalid one ends the run.
func runDoctor(ctx context.Context, r *report, path string) {
	cfg, err := config.Load(path)
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		fix := "correct the keys named above; config.example.yaml documents every key"
		if errors.Is(err, fs.ErrNotExist) {
			fix = "run `nanobot onboard` to write a starter config, or pass --config PATH"
		}
		r.add("config", statusFail, err.Error(), fix)
		return
	}
	r.secrets = daemon.Secrets(cfg, filepath.Dir(path))
	r.add("config", statusOK, path+" is valid", "")
	if err := config.CheckPermissions(path); err != nil {
		r.add("config mode", statusWarn, err.Error(), "chmod 600 "+path)
	}
	checkDirs(r, cfg, filepath.Dir(path))
	checkListen(ctx, r, cfg.Gateway.Listen)
	checkProviders(ctx, r, cfg)
	checkChannels(ctx, r, cfg, filepath.Dir(path))
	checkMCP(ctx, r, cfg)
	checkBus(ctx, r, cfg)
	checkSandbox(r, cfg)
}
