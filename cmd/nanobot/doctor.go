package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/nanobot-go/nanobot/internal/daemon"
	"github.com/nanobot-go/nanobot/internal/logging"
)

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
			path := g.configFile()
			r := daemon.Doctor(cmd.Context(), path, buildVersion())
			printReport(cmd.OutOrStdout(), r)
			if r.Count(daemon.VerdictFail) > 0 {
				return exitError{code: 1}
			}
			return nil
		},
	}
}

// printReport prints the findings, redacted, with the fix of each warning
// and failure, and a closing count.
func printReport(out io.Writer, r *daemon.Report) {
	w := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintf(w, "nanobot doctor (%s)\n\n", buildVersion())
	for _, f := range r.Findings {
		detail := strings.TrimSpace(logging.Redact(f.Detail, r.Secrets))
		fmt.Fprintf(w, "[%s]\t%s\t%s\n", f.Verdict, f.Name, strings.ReplaceAll(detail, "\n", "\n\t\t"))
		if f.Fix != "" && f.Verdict >= daemon.VerdictWarn {
			fmt.Fprintf(w, "\t\tfix: %s\n", logging.Redact(f.Fix, r.Secrets))
		}
	}
	_ = w.Flush()
	warnings := r.Count(daemon.VerdictWarn)
	switch n := r.Count(daemon.VerdictFail); {
	case n > 0:
		fmt.Fprintf(out, "\n%d problem(s) to fix, %d warning(s).\n", n, warnings)
	case warnings > 0:
		fmt.Fprintf(out, "\nNo problems; %d warning(s).\n", warnings)
	default:
		fmt.Fprintln(out, "\nEverything looks good.")
	}
}
