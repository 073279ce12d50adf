package agent

import (
	"testing"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/usage"
)

// TestTurnCall: a turn's calls are counted under the origin of what started
// it, for the chat of its session.
func TestTurnCall(t *testing.T) {
	tests := []struct {
		m    bus.InboundMessage
		key  string
		want usage.Call
	}{
		{bus.InboundMessage{Channel: "telegram", ChatID: "42"}, "telegram:42:topic:7", usage.Call{Origin: usage.OriginTurn, Session: "telegram:42:topic:7", Chat: "telegram:42"}},
		{bus.InboundMessage{Channel: "web", ChatID: "abc"}, "web:abc", usage.Call{Origin: usage.OriginTurn, Session: "web:abc", Chat: "web:abc"}},
		{bus.InboundMessage{Channel: "api", ChatID: "x"}, "api:webui:x", usage.Call{Origin: usage.OriginAPI, Session: "api:webui:x", Chat: "api:webui"}},
		{bus.InboundMessage{Channel: "telegram", Metadata: map[string]string{MetaSource: "cron"}}, "telegram:42", usage.Call{Origin: usage.OriginCron, Session: "telegram:42", Chat: "telegram:42"}},
		{bus.InboundMessage{Channel: "discord", Metadata: map[string]string{MetaSource: "heartbeat"}}, "discord:9", usage.Call{Origin: usage.OriginHeartbeat, Session: "discord:9", Chat: "discord:9"}},
		{bus.InboundMessage{Channel: "telegram", Metadata: map[string]string{MetaSource: MetaSubagent}}, "telegram:42", usage.Call{Origin: usage.OriginSubagent, Session: "telegram:42", Chat: "telegram:42"}},
	}
	for _, tt := range tests {
		if got := turnCall(tt.m, tt.key); got != tt.want {
			t.Errorf("turnCall(%+v, %s) = %+v, want %+v", tt.m, tt.key, got, tt.want)
		}
	}
}
