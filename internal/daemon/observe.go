package daemon

import (
	"context"
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
}

func (m observedModel) Complete(ctx context.Context, route string, req llm.Request, onDelta func(llm.Delta)) (llm.Message, error) {
	start := time.Now()
	msg, err := m.Model.Complete(ctx, route, req, onDelta)
	f := llm.Classify(err)
	m.metrics.ModelCall(route, f.Metric, time.Since(start), msg)
	switch f.Health { // llm.Policies
	case llm.SignalDown:
		m.health.Record(err)
	case llm.SignalUp:
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
	return []string{fmt.Sprintf("Model provider: the last call, %s ago, failed: %s", ago.Round(time.Second), llm.Classify(err).SafeReason())}
}
