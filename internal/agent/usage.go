package agent

import (
	"context"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/usage"
)

// Budget admits new model work against the usage budget (*usage.Budget):
// a turn is admitted once, at its first model call, so a turn already
// running finishes; a spent budget refuses the call with an
// *llm.BudgetError, which the turn answers like any failed call.
type Budget interface {
	Admit(ctx context.Context) (context.Context, usage.Decision)
}

// apiChannel is the channel name of the OpenAI-compatible API
// (internal/api), whose turns count as origin "api".
const apiChannel = "api"

// turnCall says who a turn's model calls are for, for the usage ledger:
// a cron job, the heartbeat, a subagent's announcement, an API request or
// a chat message.
func turnCall(m bus.InboundMessage, key string) usage.Call {
	origin := usage.OriginTurn
	switch {
	case m.Metadata[MetaSource] == string(usage.OriginCron):
		origin = usage.OriginCron
	case m.Metadata[MetaSource] == string(usage.OriginHeartbeat):
		origin = usage.OriginHeartbeat
	case m.Metadata[MetaSource] == MetaSubagent:
		origin = usage.OriginSubagent
	case m.Channel == apiChannel:
		origin = usage.OriginAPI
	}
	return usage.Call{Origin: origin, Session: key, Chat: usage.ChatOf(key)}
}

// admit asks the budget to let the work ctx carries run on; without a
// budget, or when it is spent, ctx is returned as it is (the router then
// refuses the call).
func (a *Agent) admit(ctx context.Context) context.Context {
	if a.budget == nil {
		return ctx
	}
	ctx, _ = a.budget.Admit(ctx)
	return ctx
}
