package channels

import "testing"

func TestSplitKey(t *testing.T) {
	for _, c := range []struct {
		key, chat, sub string
		hasSub, ok     bool
	}{
		{"tg:100", "100", "", false, true},
		{"tg:-100:topic:7", "-100", "7", true, true},
		{"tg:", "", "", false, false},
		{"dc:100", "", "", false, false},         // another channel's key
		{"tg:100:topic:", "", "", false, false},  // an empty topic
		{"tg::topic:7", "", "", false, false},    // an empty chat
		{"tg:1:2", "", "", false, false},         // a colon in the chat
		{"tg:1:topic:2:3", "", "", false, false}, // a colon in the topic
		{"tgx:100", "", "", false, false},        // a name that only starts alike
	} {
		chat, sub, hasSub, ok := SplitKey(c.key, "tg", ":topic:")
		if chat != c.chat || sub != c.sub || hasSub != c.hasSub || ok != c.ok {
			t.Errorf("SplitKey(%q) = %q, %q, %v, %v; want %q, %q, %v, %v", c.key, chat, sub, hasSub, ok, c.chat, c.sub, c.hasSub, c.ok)
		}
	}
}
