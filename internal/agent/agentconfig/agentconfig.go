// Package agentconfig maps the configuration file onto agent.Config. It is
// the one place that mapping lives: the daemon builds its agent with it, and
// tests that build an agent start from From(config.Defaults()), so the agent
// itself defaults nothing the file carries (see the package doc of
// internal/config) and never imports config.
package agentconfig

import (
	"github.com/nanobot-go/nanobot/internal/agent"
	"github.com/nanobot-go/nanobot/internal/config"
)

// From returns the agent's part of cfg. version is the build's, shown in the
// system prompt and /status.
func From(cfg *config.Config, version string) agent.Config {
	a := cfg.Agents
	return agent.Config{
		Workspace:          a.Workspace,
		MaxToolIterations:  a.MaxToolIterations,
		MaxConcurrentTurns: a.MaxConcurrentTurns,
		MaxGroupTurns:      a.MaxGroupTurns,
		MaxTurnsPerGroup:   a.MaxTurnsPerGroup,
		MaxQueue:           a.MaxQueue,
		MaxTokens:          a.MaxTokens,
		Temperature:        a.Temperature,
		MaxInputChars:      a.MaxInputChars,
		MemoryWindow:       a.MemoryWindow,
		HistoryBudget:      cfg.History.Budget,
		HistoryHighWater:   cfg.History.HighWater,
		HistoryLowWater:    cfg.History.LowWater,
		Version:            version,
	}
}

// Defaults is From(config.Defaults()) with the workspace ws: the agent
// settings of an empty config file, for tests and the bench.
func Defaults(ws, version string) agent.Config {
	d := config.Defaults()
	c := From(&d, version)
	c.Workspace = ws
	return c
}
