package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/discordfake"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/telegramfake"
)

// The fault-injection suite (issue 9): for every failure users report most
// against chat assistants — duplicate replies, lost replies, going quiet
// after a network blip, sessions poisoned by one bad provider answer — one
// user message goes through the whole gateway while the fault is injected,
// and the test checks what the user sees once everything has settled (the
// gateway shut down cleanly, so nothing is still on its way): exactly one
// message, which is the answer or one clear error. The session must load
// as the store would after a restart, every line valid, and hold no
// assistant message from a failed call. No goroutine may be left (TestMain).

// outcome is what the user should end up seeing.
type outcome int

const (
	answered outcome = iota // the final answer, exactly once
	errored                 // one clear error message, exactly once
)

func (o outcome) String() string { return [...]string{"answered once", "error once"}[o] }

type scenario struct {
	name    string
	setup   setup
	replies []fakellm.Reply
	// inject runs after the gateway started, before the user writes.
	inject func(g *gw)
	want   outcome
	// final is the answer (answered) or the start of the error (errored).
	final string
	// roles is the session's roles afterwards: the user message always, the
	// model's messages only from calls that succeeded.
	roles string
	check func(t *testing.T, g *gw)
}

const (
	// retries lets the router retry a failed call twice, waiting what the
	// fake's retry-after-ms header says (5 ms) rather than seconds.
	retries = "max_retries: 2"
	// toolSteps bounds a model that keeps calling tools.
	toolSteps = "max_tool_iterations: 3"
)

func TestFaultsOneUserMessage(t *testing.T) {
	var loopCalls atomic.Int64
	tests := []scenario{
		{
			name:    "llm 429 then answer",
			setup:   setup{openai: retries},
			replies: []fakellm.Reply{{Status: 429, ErrorType: "rate_limit_exceeded", ErrorMessage: "slow down", RetryAfterMS: "5"}, {Text: "Recovered."}},
			want:    answered, final: "Recovered.", roles: "user,assistant",
			check: requests(2),
		},
		{
			name:  "llm 429 storm",
			setup: setup{openai: retries},
			replies: []fakellm.Reply{
				{Status: 429, ErrorType: "rate_limit_exceeded", ErrorMessage: "slow down", RetryAfterMS: "5"},
				{Status: 429, ErrorType: "rate_limit_exceeded", ErrorMessage: "slow down", RetryAfterMS: "5"},
				{Status: 429, ErrorType: "rate_limit_exceeded", ErrorMessage: "slow down", RetryAfterMS: "5"},
			},
			want: errored, final: "⚠️ The model provider is rate-limiting me", roles: "user",
			check: requests(3),
		},
		{
			name:    "llm 500 then answer",
			setup:   setup{openai: retries},
			replies: []fakellm.Reply{{Status: 500, ErrorType: "server_error", ErrorMessage: "boom", RetryAfterMS: "5"}, {Text: "Fine now."}},
			want:    answered, final: "Fine now.", roles: "user,assistant",
		},
		{
			name:  "llm overloaded every time",
			setup: setup{openai: retries},
			replies: []fakellm.Reply{
				{Status: 529, ErrorType: "overloaded_error", ErrorMessage: "Overloaded", RetryAfterMS: "5"},
				{Status: 529, ErrorType: "overloaded_error", ErrorMessage: "Overloaded", RetryAfterMS: "5"},
				{Status: 529, ErrorType: "overloaded_error", ErrorMessage: "Overloaded", RetryAfterMS: "5"},
			},
			want: errored, final: "⚠️ The model provider is having trouble", roles: "user",
			check: requests(3),
		},
		{
			name:  "truncated stream then answer",
			setup: setup{openai: "max_retries: 1"},
			replies: []fakellm.Reply{
				{Text: "This answer will be cut off somewhere in the", Truncate: true, Chunk: 4, ChunkDelay: 5 * time.Millisecond},
				{Text: "The whole answer."},
			},
			want: answered, final: "The whole answer.", roles: "user,assistant",
		},
		{
			name:  "truncated every time",
			setup: setup{openai: "max_retries: 1"},
			replies: []fakellm.Reply{
				{Text: "cut off", Truncate: true},
				{Text: "cut off again", Truncate: true},
			},
			want: errored, final: "⚠️", roles: "user",
		},
		{
			name:    "garbage JSON chunk then answer",
			setup:   setup{openai: "max_retries: 1"},
			replies: []fakellm.Reply{{Text: "Some text before the garbage", Garbage: true}, {Text: "Clean answer."}},
			want:    answered, final: "Clean answer.", roles: "user,assistant",
		},
		{
			name:    "garbage JSON chunk every time",
			setup:   setup{openai: "max_retries: 0"},
			replies: []fakellm.Reply{{Text: "Some text before the garbage", Garbage: true}},
			want:    errored, final: "⚠️", roles: "user",
		},
		{
			name:    "error event mid-stream then answer",
			setup:   setup{openai: "max_retries: 1"},
			replies: []fakellm.Reply{{Text: "Half of it", MidStreamError: "The server had an error"}, {Text: "All of it."}},
			want:    answered, final: "All of it.", roles: "user,assistant",
		},
		{
			name: "tool arguments that are not JSON",
			replies: []fakellm.Reply{
				{ToolCalls: []fakellm.Call{{ID: "c1", Name: "read_file", Args: `{"path": notes.md`}}},
				{Text: "I could not read it."},
			},
			want: answered, final: "I could not read it.", roles: "user,assistant,tool,assistant",
			check: func(t *testing.T, g *gw) {
				res := g.script.Requests()[1].Messages[2].ToolResults
				if len(res) != 1 || !strings.HasPrefix(res[0].Content, "Error:") || !strings.Contains(res[0].Content, "not valid JSON") {
					t.Errorf("the model was not told its arguments were not JSON: %+v", res)
				}
				call := g.sessionMessages("telegram:100")[1].ToolCalls()[0]
				if call.ParseError == "" || call.RawArgs != `{"path": notes.md` {
					t.Errorf("stored call = %+v, want the raw arguments and the parse error", call)
				}
			},
		},
		{
			name:  "model loops on tool calls",
			setup: setup{agents: toolSteps},
			inject: func(g *gw) {
				g.script.Func = func(fakellm.Request) fakellm.Reply {
					n := loopCalls.Add(1)
					return fakellm.Reply{ToolCalls: []fakellm.Call{{ID: fmt.Sprintf("loop%d", n), Name: "list_dir", Args: `{"path":"."}`}}}
				}
			},
			want: answered, final: "I stopped after 3 tool steps without reaching an answer. Tell me how to continue, or narrow the task down.",
			roles: "user,assistant,tool,assistant,tool,assistant,tool,assistant",
			check: requests(3),
		},
		{
			name:  "exec past its own timeout",
			setup: setup{tools: "exec: {timeout: 300ms}"},
			replies: []fakellm.Reply{
				{ToolCalls: []fakellm.Call{{ID: "c1", Name: "exec", Args: `{"command":"sleep 30.0301 & sleep 30.0302"}`}}},
				{Text: "The command took too long."},
			},
			want: answered, final: "The command took too long.", roles: "user,assistant,tool,assistant",
			check: both(toolErrorSays("timed out"), noProcess("30.030")),
		},
		{
			name:  "tool past agents.tool_timeout",
			setup: setup{agents: "tool_timeout: 300ms", tools: "exec: {timeout: 30s}"},
			replies: []fakellm.Reply{
				{ToolCalls: []fakellm.Call{{ID: "c1", Name: "exec", Args: `{"command":"sleep 30.0401 & sleep 30.0402"}`}}},
				{Text: "The tool took too long."},
			},
			want: answered, final: "The tool took too long.", roles: "user,assistant,tool,assistant",
			check: both(toolErrorSays("timed out"), noProcess("30.040")),
		},
		{
			name:    "telegram 429 storm on send",
			setup:   setup{telegram: "streaming: false"},
			replies: []fakellm.Reply{{Text: "Delivered despite the storm."}},
			inject: func(g *gw) {
				g.tg.Inject("sendMessage", telegramfake.Fault{Kind: telegramfake.RateLimit, RetryAfter: 1, Times: 6})
			},
			want: answered, final: "Delivered despite the storm.", roles: "user,assistant",
			check: rateLimited("sendMessage", 6),
		},
		{
			name:    "telegram 429 storm on edit",
			replies: []fakellm.Reply{{Text: "A streamed answer that grows while the edits are refused.", Chunk: 4, ChunkDelay: 15 * time.Millisecond}},
			inject: func(g *gw) {
				g.tg.Inject("editMessageText", telegramfake.Fault{Kind: telegramfake.RateLimit, RetryAfter: 1, Times: 6})
			},
			want: answered, final: "A streamed answer that grows while the edits are refused.", roles: "user,assistant",
			check: rateLimited("editMessageText", 6),
		},
		{
			name:    "getUpdates 5xx",
			replies: []fakellm.Reply{{Text: "Back online."}},
			inject: func(g *gw) {
				g.tg.Inject("getUpdates", telegramfake.Fault{Kind: telegramfake.ServerError, Times: 3})
			},
			want: answered, final: "Back online.", roles: "user,assistant",
		},
		{
			name:    "getUpdates stalls",
			setup:   setup{telegram: "poll_timeout: 1s\nstall_grace: 200ms"},
			replies: []fakellm.Reply{{Text: "Polling restarted."}},
			inject: func(g *gw) {
				g.tg.Inject("getUpdates", telegramfake.Fault{Kind: telegramfake.Stall, Times: 1})
			},
			want: answered, final: "Polling restarted.", roles: "user,assistant",
			check: func(t *testing.T, g *gw) {
				stalled := 0
				for _, c := range g.tg.Calls("getUpdates") {
					if c.Error == "stalled" {
						stalled++
					}
				}
				if stalled != 1 {
					t.Errorf("%d stalled getUpdates, want 1", stalled)
				}
			},
		},
	}
	for _, sc := range tests {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			runScenario(t, sc)
		})
	}
	// The model-call faults again through the Responses API (issue 18): the
	// same fake serves /v1/responses with the same faults.
	for _, sc := range tests {
		if !responsesFaults[sc.name] {
			continue
		}
		sc.setup.openai += "\nkind: openai-responses"
		sc.check = both(onPath("/v1/responses"), orNothing(sc.check))
		t.Run("responses/"+sc.name, func(t *testing.T) {
			t.Parallel()
			runScenario(t, sc)
		})
	}
}

// responsesFaults names the scenarios of TestFaultsOneUserMessage that are
// about the model call itself, run once more with kind openai-responses.
var responsesFaults = map[string]bool{
	"llm 429 then answer": true, "llm 429 storm": true, "llm 500 then answer": true, "llm overloaded every time": true,
	"truncated stream then answer": true, "truncated every time": true,
	"garbage JSON chunk then answer": true, "garbage JSON chunk every time": true,
	"error event mid-stream then answer": true, "tool arguments that are not JSON": true,
}

// onPath checks every model call went to path.
func onPath(path string) func(*testing.T, *gw) {
	return func(t *testing.T, g *gw) {
		t.Helper()
		for _, r := range g.script.Requests() {
			if r.Path != path {
				t.Errorf("model call went to %s, want %s", r.Path, path)
			}
		}
	}
}

func orNothing(check func(*testing.T, *gw)) func(*testing.T, *gw) {
	if check == nil {
		return func(*testing.T, *gw) {}
	}
	return check
}

// The provider faults above, with Gemini answering: Google's error bodies
// (RetryInfo's retryDelay instead of retry-after-ms), its stream cut without
// a finish reason, an error object inside the stream. The strict fake must
// accept every request, tool loops included (signatures replayed).
func TestFaultsOneUserMessageGemini(t *testing.T) {
	gem := func(retries string) setup { return setup{gemini: true, openai: retries} }
	slow := fakellm.Reply{Status: 429, ErrorMessage: "Resource has been exhausted (e.g. check quota).", RetryAfterMS: "5"}
	down := fakellm.Reply{Status: 503, ErrorMessage: "The model is overloaded. Please try again later.", RetryAfterMS: "5"}
	tests := []scenario{
		{name: "429 then answer", setup: gem(retries), replies: []fakellm.Reply{slow, {Text: "Recovered."}},
			want: answered, final: "Recovered.", roles: "user,assistant", check: requests(2)},
		{name: "429 storm", setup: gem(retries), replies: []fakellm.Reply{slow, slow, slow},
			want: errored, final: "⚠️ The model provider is rate-limiting me", roles: "user", check: requests(3)},
		{name: "503 every time", setup: gem(retries), replies: []fakellm.Reply{down, down, down},
			want: errored, final: "⚠️ The model provider is having trouble", roles: "user", check: requests(3)},
		{name: "truncated stream then answer", setup: gem("max_retries: 1"),
			replies: []fakellm.Reply{{Text: "This answer will be cut off somewhere in the", Truncate: true, Chunk: 4, ChunkDelay: 5 * time.Millisecond}, {Text: "The whole answer."}},
			want:    answered, final: "The whole answer.", roles: "user,assistant"},
		{name: "truncated every time", setup: gem("max_retries: 1"),
			replies: []fakellm.Reply{{Text: "cut off", Truncate: true}, {Text: "cut off again", Truncate: true}},
			want:    errored, final: "⚠️", roles: "user"},
		{name: "garbage chunk then answer", setup: gem("max_retries: 1"),
			replies: []fakellm.Reply{{Text: "Some text before the garbage", Garbage: true}, {Text: "Clean answer."}},
			want:    answered, final: "Clean answer.", roles: "user,assistant"},
		{name: "error inside the stream then answer", setup: gem("max_retries: 1"),
			replies: []fakellm.Reply{{Text: "Half of it", MidStreamError: "UNAVAILABLE"}, {Text: "All of it."}},
			want:    answered, final: "All of it.", roles: "user,assistant"},
		{name: "tool loop with thought signatures", setup: gem(""),
			replies: []fakellm.Reply{
				{Thinking: "Look first.", ToolCalls: []fakellm.Call{{Name: "list_dir", Args: `{"path":"."}`}, {Name: "list_dir", Args: `{"path":"memory"}`}}},
				{Text: "Listed both."},
			},
			want: answered, final: "Listed both.", roles: "user,assistant,tool,assistant",
			check: func(t *testing.T, g *gw) {
				for _, r := range g.gem.Rejected() {
					t.Errorf("the fake Gemini refused a request: %s", r.Message)
				}
				parts := g.sessionMessages("telegram:100")[1].Parts
				if parts[len(parts)-2].Kind != llm.PartToolCall || parts[len(parts)-2].Signature == "" {
					t.Errorf("stored parts %+v: the first call lost its signature", parts)
				}
			}},
	}
	for _, sc := range tests {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			runScenario(t, sc)
		})
	}
}

// runScenario sends one DM through the gateway under sc's fault and checks
// the outcome once the gateway has stopped.
func runScenario(t *testing.T, sc scenario) {
	g := startWith(t, sc.setup)
	g.script.Push(sc.replies...)
	if sc.inject != nil {
		sc.inject(g)
	}
	g.tg.PushMessage(telegramfake.DM(owner, "hello"))
	if sc.want == answered {
		g.waitLast(owner, sc.final)
	} else {
		g.waitPrefix(owner, sc.final)
	}
	if err := g.stop(); err != nil {
		t.Fatal(err)
	}
	visible := g.tg.Visible(owner)
	if len(visible) != 1 {
		t.Fatalf("the user sees %d messages, want exactly one (%s): %q", len(visible), sc.want, visible)
	}
	if sc.want == answered && visible[0] != sc.final {
		t.Fatalf("visible = %q, want the answer %q", visible[0], sc.final)
	}
	if sc.want == errored && !strings.HasPrefix(visible[0], sc.final) {
		t.Fatalf("visible = %q, want an error starting %q", visible[0], sc.final)
	}
	msgs := g.sessionMessages("telegram:100")
	if got := roles(msgs); got != sc.roles {
		t.Errorf("session roles = %s, want %s", got, sc.roles)
	}
	for i, m := range msgs {
		if m.Role == llm.RoleAssistant && m.Meta != nil && !m.Meta.Synthetic && m.Meta.StopReason == "" {
			t.Errorf("session message %d is an assistant message without a stop reason (from a failed call?)", i)
		}
	}
	if sc.check != nil {
		sc.check(t, g)
	}
}

// requests checks how many model calls were made.
func requests(n int) func(*testing.T, *gw) {
	return func(t *testing.T, g *gw) {
		t.Helper()
		if got := len(g.script.Requests()); got != n {
			t.Errorf("%d model calls, want %d", got, n)
		}
	}
}

// toolErrorSays checks the model got an error tool result containing want.
func toolErrorSays(want string) func(*testing.T, *gw) {
	return func(t *testing.T, g *gw) {
		t.Helper()
		reqs := g.script.Requests()
		res := reqs[len(reqs)-1].Messages[2].ToolResults
		// The OpenAI wire has no is_error: the text says it.
		if len(res) != 1 || !strings.HasPrefix(res[0].Content, "Error:") || !strings.Contains(res[0].Content, want) {
			t.Errorf("tool result = %+v, want an error saying %q", res, want)
		}
		stored := g.sessionMessages("telegram:100")[2].ToolResults()
		if len(stored) != 1 || !stored[0].IsError {
			t.Errorf("stored tool result = %+v, want is_error", stored)
		}
	}
}

// rateLimited checks the fake refused n calls of method with 429.
func rateLimited(method string, n int) func(*testing.T, *gw) {
	return func(t *testing.T, g *gw) {
		t.Helper()
		got := 0
		for _, c := range g.tg.Calls(method) {
			if c.Status == 429 {
				got++
			}
		}
		if got != n {
			t.Errorf("%d %s calls answered 429, want the whole storm of %d", got, method, n)
		}
	}
}

func both(checks ...func(*testing.T, *gw)) func(*testing.T, *gw) {
	return func(t *testing.T, g *gw) {
		t.Helper()
		for _, c := range checks {
			c(t, g)
		}
	}
}

// noProcess checks, where /proc exists, that no process whose command line
// contains marker is left: the tool's whole process group was killed.
func noProcess(marker string) func(*testing.T, *gw) {
	return func(t *testing.T, g *gw) {
		t.Helper()
		procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
		if err != nil || len(procs) == 0 {
			t.Log("no /proc: leftover processes not checked")
			return
		}
		for _, p := range procs {
			b, err := os.ReadFile(p)
			if err == nil && strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), marker) {
				t.Errorf("process %s (%q) outlived the tool call", p, b)
			}
		}
	}
}

// Discord's gateway connection breaks while the model is answering: the
// answer still goes out (over REST), a message sent during the outage is
// answered once when the session resumes (Discord replays it) or, after a
// non-resumable op 9 or close, once the new session's catch-up fetched it,
// and a message after recovery is answered once, after it.
func TestFaultsDiscordGateway(t *testing.T) {
	tests := []struct {
		name       string
		break_     func(*discordfake.Server)
		resumable  bool
		identifies int
	}{
		{"abrupt disconnect", (*discordfake.Server).DropConnections, true, 1},
		{"op 7 reconnect", (*discordfake.Server).Reconnect, true, 1},
		{"op 9 resumable", func(s *discordfake.Server) { s.InvalidateSessions(true) }, false, 2},
		{"op 9 not resumable", func(s *discordfake.Server) { s.InvalidateSessions(false) }, false, 2},
		{"close 4000", func(s *discordfake.Server) { s.CloseConnections(discordfake.CloseUnknownError, "Unknown error.") }, true, 1},
		{"close 4009 session timed out", func(s *discordfake.Server) {
			s.CloseConnections(discordfake.CloseSessionTimedOut, "Session timed out.")
		}, false, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := startWith(t, setup{discord: true})
			g.dc.WaitReady(t, 1)
			g.script.Func = func(r fakellm.Request) fakellm.Reply {
				text := r.LastUserText()
				reply := fakellm.Reply{Text: "answer to " + text[strings.LastIndex(text, "\n")+1:]}
				if strings.HasSuffix(text, "before") {
					reply.Delay = 200 * time.Millisecond
				}
				return reply
			}
			dmChan := g.dc.AddDM(g.dcOwner)
			g.dc.SendMessageCreate(discordfake.Incoming{ChannelID: dmChan, Author: g.dcOwner, Content: "before"})
			g.waitUntil("the model to be asked", func() bool { return len(g.script.Requests()) == 1 })
			tt.break_(g.dc)
			g.dc.SendMessageCreate(discordfake.Incoming{ChannelID: dmChan, Author: g.dcOwner, Content: "during"})
			g.dc.WaitFor(t, "recovery", func() bool {
				st := g.dc.Stats()
				return st.Identifies >= tt.identifies && st.Live == 1 && (!tt.resumable || st.Resumes >= 1)
			})
			g.dcWaitLast(dmChan, "answer to during")
			g.dc.SendMessageCreate(discordfake.Incoming{ChannelID: dmChan, Author: g.dcOwner, Content: "after"})
			g.dcWaitLast(dmChan, "answer to after")
			if err := g.stop(); err != nil {
				t.Fatal(err)
			}
			want := []string{"answer to before", "answer to during", "answer to after"}
			var got []string
			for _, m := range g.dc.Messages(dmChan) {
				if !m.Deleted {
					got = append(got, m.Content)
				}
			}
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("the user sees %q, want %q (each once)", got, want)
			}
			msgs := g.sessionMessages("discord:" + dmChan)
			if r := roles(msgs); r != strings.TrimSuffix(strings.Repeat("user,assistant,", len(want)), ",") {
				t.Errorf("session roles = %s", r)
			}
		})
	}
}
