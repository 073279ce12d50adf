package daemon

import (
	"maps"
	"testing"

	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/channels/telegram"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/schedule"
)

// named is a channel that only has a name.
type named struct {
	channels.Channel
	name string
}

func (n named) Name() string { return n.name }

func TestChatOfSession(t *testing.T) {
	g := &Gateway{opts: Options{Role: RoleAll}, channels: []*channelRun{{name: "telegram", ch: named{name: "telegram"}}, {name: "discord", ch: named{name: "discord"}}}}
	tests := []struct {
		key  string
		ok   bool
		want schedule.Target
	}{
		{"telegram:42", true, schedule.Target{Channel: "telegram", ChatID: "42", SessionKey: "telegram:42"}},
		{"telegram:-100123:topic:7", true, schedule.Target{Channel: "telegram", ChatID: "-100123", SessionKey: "telegram:-100123:topic:7",
			Metadata: map[string]string{"message_thread_id": "7"}}},
		{"discord:555", true, schedule.Target{Channel: "discord", ChatID: "555", SessionKey: "discord:555"}},
		{"discord:555:thread:777", true, schedule.Target{Channel: "discord", ChatID: "777", SessionKey: "discord:555:thread:777",
			Metadata: map[string]string{"thread_id": "777", "parent_id": "555"}}},
		{"cli:local", false, schedule.Target{}},
		{"system:heartbeat", false, schedule.Target{}},
		{"slack:C1", false, schedule.Target{}}, // not running here
		{"telegram:", false, schedule.Target{}},
		{"telegram:1:2", false, schedule.Target{}},
		{"discord:1:topic:2", false, schedule.Target{}},
	}
	for _, tc := range tests {
		got, ok := g.chatOfSession(tc.key)
		if ok != tc.ok || got.Channel != tc.want.Channel || got.ChatID != tc.want.ChatID || got.SessionKey != tc.want.SessionKey ||
			!maps.Equal(got.Metadata, tc.want.Metadata) {
			t.Errorf("chatOfSession(%q) = %+v, %v; want %+v, %v", tc.key, got, ok, tc.want, tc.ok)
		}
	}
	if !g.runsChannel("telegram") || g.runsChannel("cli") {
		t.Error("runsChannel should accept running channels only")
	}
}

// An agent worker runs no channel itself: job runs and heartbeat work reach
// the chats of the channels the channels process serves, by configuration.
func TestRunsChannelInAnAgentWorker(t *testing.T) {
	cfg := &config.Config{}
	telegram.Of(cfg).Enabled = true
	cfg.Channels.Web.Enabled = true
	g := &Gateway{cfg: cfg, opts: Options{Role: RoleAgent}}
	tests := []struct {
		channel string
		want    bool
	}{
		{"telegram", true},
		{"web", true},
		{"discord", false}, // not enabled
		{"api", false},     // answers its own request, no chat to reach later
		{"cli", false},
	}
	for _, tc := range tests {
		if got := g.runsChannel(tc.channel); got != tc.want {
			t.Errorf("runsChannel(%q) = %v, want %v", tc.channel, got, tc.want)
		}
	}
	if _, ok := g.chatOfSession("telegram:42"); !ok {
		t.Error("chatOfSession refuses a Telegram chat in an agent worker")
	}
}
