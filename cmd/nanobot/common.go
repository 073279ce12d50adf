package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/daemon"
	"github.com/nanobot-go/nanobot/internal/logging"
	"github.com/nanobot-go/nanobot/internal/sandbox"
)

// loadConfig loads and validates the configuration and builds the logger
// (with every configured secret redacted), logging to stderr.
func loadConfig(g *globalFlags) (*config.Config, *zap.Logger, error) {
	return loadConfigLogTo(g, nil)
}

// loadConfigLogTo is loadConfig with the log written to out (nil: stderr).
func loadConfigLogTo(g *globalFlags, out io.Writer) (*config.Config, *zap.Logger, error) {
	path := g.configFile()
	cfg, err := daemon.LoadConfig(path)
	if err != nil {
		return nil, nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, nil, fmt.Errorf("invalid config %s:\n%w", path, err)
	}
	level := cfg.Log.Level
	if g.logLevel != "" {
		level = g.logLevel
	}
	log, err := logging.New(logging.Options{Level: level, Format: cfg.Log.Format, Secrets: cfg.Secrets(),
		SecretFiles: daemon.SecretFiles(cfg, filepath.Dir(path)), Out: out})
	if err != nil {
		return nil, nil, err
	}
	if err := config.CheckPermissions(path); err != nil {
		log.Warn("config file is readable by other users; it holds secrets (chmod 600 it)", zap.String("path", path), zap.Error(err))
	}
	return cfg, log, nil
}

// hardened is the RunE of a command that runs the model's tools: it loads
// the config and the logger, makes the process non-dumpable (harden) and
// runs fn; the logger is flushed when fn returns.
func hardened(g *globalFlags, fn func(cmd *cobra.Command, cfg *config.Config, log *zap.Logger) error) func(*cobra.Command, []string) error {
	return hardenedLogTo(g, nil, fn)
}

// hardenedLogTo is hardened with the log written where logTo says (nil, or
// a nil writer from it: stderr).
func hardenedLogTo(g *globalFlags, logTo func() io.Writer, fn func(cmd *cobra.Command, cfg *config.Config, log *zap.Logger) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		var out io.Writer
		if logTo != nil {
			out = logTo()
		}
		cfg, log, err := loadConfigLogTo(g, out)
		if err != nil {
			return err
		}
		defer func() { _ = log.Sync() }()
		harden(log)
		return fn(cmd, cfg, log)
	}
}

// harden makes a process that runs the model's tools non-dumpable
// (sandbox.Harden), so that commands cannot read its keys through /proc.
func harden(log *zap.Logger) {
	if err := sandbox.Harden(); err != nil {
		log.Warn("could not make the process non-dumpable; commands of the same user may read its environment", zap.Error(err))
	}
}

// dataDir is where the daemon keeps its own state: next to the config file.
func dataDir(g *globalFlags) string {
	return filepath.Dir(g.configFile())
}

// configFile is the config file the command reads: --config (or
// $NANOBOT_CONFIG), else the default path.
func (g *globalFlags) configFile() string {
	if g.configPath != "" {
		return g.configPath
	}
	return config.DefaultPath()
}
