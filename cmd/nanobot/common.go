package main

import (
	"fmt"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/logging"
)

// loadConfig loads and validates the configuration and builds the logger
// (with every configured secret redacted).
func loadConfig(g *globalFlags) (*config.Config, *zap.Logger, error) {
	path := g.configPath
	if path == "" {
		path = config.DefaultPath()
	}
	cfg, err := config.Load(path)
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
	log, err := logging.New(logging.Options{Level: level, Format: cfg.Log.Format, Secrets: cfg.Secrets()})
	if err != nil {
		return nil, nil, err
	}
	if err := config.CheckPermissions(path); err != nil {
		log.Warn("config file is readable by other users; it holds secrets (chmod 600 it)", zap.String("path", path), zap.Error(err))
	}
	return cfg, log, nil
}

// dataDir is where the daemon keeps its own state: next to the config file.
func dataDir(g *globalFlags) string {
	path := g.configPath
	if path == "" {
		path = config.DefaultPath()
	}
	return filepath.Dir(path)
}
