package daemon

import (
	"fmt"
	"slices"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/channels/kinds"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/skills"
	"github.com/nanobot-go/nanobot/internal/skills/builtin"
	"github.com/nanobot-go/nanobot/internal/tools"
	"github.com/nanobot-go/nanobot/internal/tools/web"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

// registerBuiltins registers the built-in tools
// (docs/tools.md#the-built-in-tools) the config enables. The cron tool is not
// among them: it exists only where a scheduler runs (the gateway, see
// schedule.go).
func registerBuiltins(reg *tools.Registry, cfg *config.Config, dataDir string, root *workspace.Root, b tools.Publisher, log *zap.Logger) error {
	builtins := []tools.Tool{
		// Built-in skills are listed at builtin: locations; read_file opens them.
		tools.NewReadFile(root, tools.WithMount(skills.BuiltinScheme, builtin.FS())),
		tools.NewWriteFile(root),
		tools.NewEditFile(root),
		tools.NewListDir(root),
		tools.NewMessage(b, messageTargets(cfg), root),
		web.NewSearch(web.SearchConfig{
			Provider: cfg.Tools.Web.SearchProvider, BraveAPIKey: cfg.Tools.Web.BraveAPIKey, MaxResults: cfg.Tools.Web.MaxResults,
		}, log.Named("web")),
		web.NewFetch(web.FetchConfig{MaxBytes: cfg.Tools.Web.FetchMaxBytes}, log.Named("web")),
	}
	if cfg.Tools.Exec.Enabled {
		opts := tools.ExecOptions{Secrets: Secrets(cfg, dataDir)}
		if err := execSandbox(cfg, dataDir, &opts, log.Named("sandbox")); err != nil {
			return fmt.Errorf("tools.exec.sandbox: %w", err)
		}
		exec, err := tools.NewExec(cfg.Tools.Exec, root, opts, log.Named("exec"))
		if err != nil {
			return fmt.Errorf("tools.exec: %w", err)
		}
		builtins = append(builtins, exec)
	}
	for _, t := range builtins {
		if err := reg.Register(t); err != nil {
			return fmt.Errorf("register tool %s: %w", t.Spec().Name, err)
		}
	}
	return nil
}

// messageTargets lets the message tool reach another chat only when that
// chat's id is on the channel's allow list (a user's DM chat id is their
// user id on Telegram) or the list allows everyone.
func messageTargets(cfg *config.Config) tools.TargetPolicy {
	allowed := map[string][]string{}
	for _, k := range kinds.All {
		allowed[k.Name] = k.Access(cfg).AllowFrom
	}
	return func(channel, chatID string) bool {
		list := allowed[channel]
		return slices.Contains(list, "*") || slices.Contains(list, chatID)
	}
}
