package daemon

import (
	"context"
	"errors"
	"fmt"
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

// modelStatus is /status's line about the model provider when its last
// call failed, in a short form safe for the chat (no URL, no key):
// "Model provider: the last call, 12s ago, failed: cannot reach
// api.openai.com: connection refused". Nothing while calls succeed.
func modelStatus(h *health.ModelHealth) []string {
	err, ago := h.LastFailure()
	if err == nil {
		return nil
	}
	return []string{fmt.Sprintf("Model provider: the last call, %s ago, failed: %s", ago.Round(time.Second), failureReason(err))}
}

// failureReason says in a few safe words why a model call failed.
func failureReason(err error) string {
	if reason, ok := llm.Unreachable(err); ok {
		return reason
	}
	var api *llm.APIError
	switch {
	case errors.As(err, &api) && api.Type == "timeout":
		return "timed out (" + api.Message + ")"
	case errors.As(err, &api) && api.Status != 0:
		return fmt.Sprintf("%s answered HTTP %d", api.Provider, api.Status)
	}
	return "see the daemon log"
}
