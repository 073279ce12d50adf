package daemon

import (
	"context"
	"time"

	"github.com/nanobot-go/nanobot/internal/agent"
	"github.com/nanobot-go/nanobot/internal/health"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/metrics"
)

// observedModel reports every model call the agent makes to the metrics
// and to the provider's readiness, around the router.
type observedModel struct {
	agent.Model
	metrics *metrics.Metrics
	health  *health.ModelHealth
	usage   *usageTally
}

func (m observedModel) Complete(ctx context.Context, route string, req llm.Request, onDelta func(llm.Delta)) (llm.Message, error) {
	start := time.Now()
	msg, err := m.Model.Complete(ctx, route, req, onDelta)
	outcome := metrics.LLMOutcome(err)
	m.metrics.ModelCall(route, outcome, time.Since(start), msg)
	if err == nil {
		m.usage.record(msg)
	}
	switch {
	case outcome == metrics.LLMCancelled:
		// Says nothing about the provider.
	case metrics.Unreachable(outcome):
		m.health.Record(err)
	default:
		m.health.Record(nil) // it answered, if only to refuse this request
	}
	return msg, err
}
