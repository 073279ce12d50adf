package daemon

import (
	"testing"

	"github.com/nanobot-go/nanobot/internal/config"
)

// The panel shows the levels for the budget the agent projects with:
// history.budget lowers the window less the reply, never raises it.
func TestPanelHistoryBudget(t *testing.T) {
	tests := []struct {
		name   string
		budget int
		want   int
	}{
		{"window less the reply", 0, 120_000},
		{"history.budget lower", 50_000, 50_000},
		{"history.budget higher is ignored", 500_000, 120_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &config.Config{Agents: config.AgentsConfig{ContextWindow: 128_000, MaxTokens: 8_000}, History: config.HistoryConfig{Budget: tt.budget}}
			if got := historyBudget(cfg); got != tt.want {
				t.Errorf("historyBudget = %d, want %d", got, tt.want)
			}
		})
	}
}
