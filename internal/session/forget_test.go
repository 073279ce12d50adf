package session

import (
	"fmt"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// Two stores over one directory stand for two agent workers sharing the
// workspace: after Forget, a worker sees what the other appended, and its
// own next append lands after it.
func TestForgetRereadsWhatAnotherStoreAppended(t *testing.T) {
	dir := t.TempDir()
	a := newStore(t, dir, Options{}, zaptest.NewLogger(t))
	b := newStore(t, dir, Options{}, zaptest.NewLogger(t))
	const key = "telegram:1"
	mustAppend(t, a, key, llm.NewText(llm.RoleUser, "one"), llm.NewText(llm.RoleAssistant, "1"))
	if snap, err := b.Get(key); err != nil || len(snap.Messages) != 2 {
		t.Fatalf("b.Get = %d messages, %v; want 2", len(snap.Messages), err)
	}
	mustAppend(t, a, key, llm.NewText(llm.RoleUser, "two"), llm.NewText(llm.RoleAssistant, "2"))
	if err := b.Forget(key); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, b, key, llm.NewText(llm.RoleUser, "three"))
	snap := reopen(t, dir, key)
	var got []string
	for _, m := range snap.Messages {
		got = append(got, m.Text())
	}
	if want := "[one 1 two 2 three]"; fmt.Sprint(got) != want {
		t.Fatalf("session = %v, want %s", got, want)
	}
}
