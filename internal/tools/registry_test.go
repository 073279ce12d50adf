package tools

import (
	"github.com/nanobot-go/nanobot/internal/sandbox"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
)

// The test binary stands in for nanobot's sandbox launcher when the exec
// tests start it with __sandbox-exec.
func TestMain(m *testing.M) {
	sandbox.MaybeLaunch()
	goleak.VerifyTestMain(m)
}

// fakeTool is a configurable Tool for registry tests.
type fakeTool struct {
	name   string
	params string
	run    func(ctx context.Context, inv Invocation) (Result, error)
	calls  atomic.Int32
	ro     bool
}

func (f *fakeTool) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: f.name, Description: "test tool " + f.name, Parameters: json.RawMessage(f.params)}
}

func (f *fakeTool) Run(ctx context.Context, inv Invocation) (Result, error) {
	f.calls.Add(1)
	if f.run == nil {
		return Result{Text: string(inv.Args)}, nil
	}
	return f.run(ctx, inv)
}

func (f *fakeTool) ReadOnly() bool { return f.ro }

const echoParams = `{
  "type": "object",
  "properties": {
    "path":   {"type": "string"},
    "offset": {"type": "integer", "minimum": 1},
    "ratio":  {"type": "number"},
    "flag":   {"type": "boolean"},
    "id":     {"type": "string"},
    "ids":    {"type": "array", "items": {"type": "integer"}},
    "mode":   {"type": "string", "enum": ["a", "b"]},
    "opt":    {"type": "object", "properties": {"depth": {"type": "integer"}}, "required": ["depth"]},
    "either": {"type": ["integer", "boolean"]}
  },
  "required": ["path"]
}`

// newTestRegistry builds a registry with opts; limits left zero are the
// defaults of config.
func newTestRegistry(t *testing.T, opts RegistryOptions, tools ...Tool) *Registry {
	t.Helper()
	d := RegistryLimits(config.Defaults().Agents)
	if opts.Timeout == 0 {
		opts.Timeout = d.Timeout
	}
	if opts.MaxOutput == 0 {
		opts.MaxOutput = d.MaxOutput
	}
	r := NewRegistry(opts, zaptest.NewLogger(t))
	for _, tool := range tools {
		if err := r.Register(tool); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func call(name, args string) llm.ToolCall {
	return llm.ToolCall{ID: "call_1", Name: name, Arguments: json.RawMessage(args)}
}

func text(res llm.ToolResult) string { return res.Content.Live }

func TestExecuteArguments(t *testing.T) {
	echo := &fakeTool{name: "echo", params: echoParams}
	r := newTestRegistry(t, RegistryOptions{}, echo)
	cases := []struct {
		name    string
		args    string
		want    string // exact tool input, when the call is accepted
		wantErr string // substring of the error result
	}{
		{"plain", `{"path":"a.md","offset":3}`, `{"offset":3,"path":"a.md"}`, ""},
		{"empty arguments", ``, "", `missing required argument "path"`},
		{"null arguments", `null`, "", `missing required argument "path"`},
		{"missing required", `{"offset":3}`, "", `missing required argument "path"`},
		{"not an object", `[1,2]`, "", "arguments must be a JSON object, got an array"},
		{"string to integer", `{"path":"a","offset":"5"}`, `{"offset":5,"path":"a"}`, ""},
		{"spaced string to integer", `{"path":"a","offset":" 7 "}`, `{"offset":7,"path":"a"}`, ""},
		{"string to number", `{"path":"a","ratio":"0.5"}`, `{"path":"a","ratio":0.5}`, ""},
		{"string to boolean", `{"path":"a","flag":"true"}`, `{"flag":true,"path":"a"}`, ""},
		{"string to boolean caps", `{"path":"a","flag":"FALSE"}`, `{"flag":false,"path":"a"}`, ""},
		{"number to string", `{"path":5}`, `{"path":"5"}`, ""},
		{"big number to string exact", `{"path":"a","id":123456789012345678901234}`, `{"id":"123456789012345678901234","path":"a"}`, ""},
		{"boolean to string", `{"path":true}`, `{"path":"true"}`, ""},
		{"string to array", `{"path":"a","ids":"[1, \"2\"]"}`, `{"ids":[1,2],"path":"a"}`, ""},
		{"array items cast", `{"path":"a","ids":["3",4]}`, `{"ids":[3,4],"path":"a"}`, ""},
		{"string to object", `{"path":"a","opt":"{\"depth\":\"2\"}"}`, `{"opt":{"depth":2},"path":"a"}`, ""},
		{"null optional dropped", `{"path":"a","offset":null}`, `{"path":"a"}`, ""},
		{"integer-valued float", `{"path":"a","offset":5.0}`, `{"offset":5,"path":"a"}`, ""},
		{"type list", `{"path":"a","either":"true"}`, `{"either":true,"path":"a"}`, ""},
		{"extra property kept", `{"path":"a","zzz":1}`, `{"path":"a","zzz":1}`, ""},
		{"null required", `{"path":null}`, "", `argument "path": expected string, got null`},
		{"uncastable integer", `{"path":"a","offset":"abc"}`, "", `argument "offset": expected integer, got string "abc"`},
		{"fractional integer", `{"path":"a","offset":1.5}`, "", `argument "offset": expected integer, got number "1.5"`},
		{"type list mismatch", `{"path":"a","either":"maybe"}`, "", `argument "either": expected one of integer, boolean, got string "maybe"`},
		{"object for string", `{"path":{"a":1}}`, "", `argument "path": expected string, got object`},
		{"minimum", `{"path":"a","offset":0}`, "", `argument "offset": minimum`},
		{"enum", `{"path":"a","mode":"c"}`, "", `argument "mode": enum`},
		{"nested required", `{"path":"a","opt":{}}`, "", `argument "opt": missing required argument "depth"`},
		{"nested array item", `{"path":"a","ids":[1,"x"]}`, "", `argument "ids[]"`},
		{"number out of range", `{"path":"a","ratio":1e999}`, "", `argument "ratio": number 1e999 is out of range`},
		{"trailing data", `{"path":"a"} {}`, "", "not valid JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := echo.calls.Load()
			res := r.Execute(context.Background(), call("echo", c.args), Origin{})
			ran := echo.calls.Load() > before
			if c.wantErr != "" {
				if !res.IsError || !strings.Contains(text(res), c.wantErr) {
					t.Fatalf("result %q (error %v), want an error containing %q", text(res), res.IsError, c.wantErr)
				}
				if !strings.Contains(text(res), "invalid arguments for echo") || ran {
					t.Fatalf("result %q: want an invalid-arguments error and the tool not run (ran=%v)", text(res), ran)
				}
				return
			}
			if res.IsError || text(res) != c.want {
				t.Fatalf("tool got %q (error %v), want %q", text(res), res.IsError, c.want)
			}
		})
	}
}

func TestExecuteUnknownTool(t *testing.T) {
	r := newTestRegistry(t, RegistryOptions{}, &fakeTool{name: "zeta", params: `{"type":"object"}`},
		&fakeTool{name: "alpha", params: `{"type":"object"}`})
	res := r.Execute(context.Background(), call("nope", `{}`), Origin{})
	want := `Error: unknown tool "nope". Available tools: alpha, zeta.`
	if !res.IsError || text(res) != want {
		t.Fatalf("got %q, want %q", text(res), want)
	}
	if res.ToolCallID != "call_1" || res.Name != "nope" {
		t.Fatalf("result ids %q %q", res.ToolCallID, res.Name)
	}
}

func TestExecuteParseError(t *testing.T) {
	tool := &fakeTool{name: "echo", params: echoParams}
	r := newTestRegistry(t, RegistryOptions{}, tool)
	c := llm.ToolCall{ID: "c", Name: "echo", RawArgs: `{"path": "a.md"`, ParseError: "unexpected end of JSON input"}
	res := r.Execute(context.Background(), c, Origin{})
	if !res.IsError || tool.calls.Load() != 0 {
		t.Fatalf("parse error: error=%v calls=%d", res.IsError, tool.calls.Load())
	}
	for _, want := range []string{"not valid JSON", "unexpected end of JSON input", "was not run", `{"path": "a.md"`} {
		if !strings.Contains(text(res), want) {
			t.Errorf("result %q lacks %q", text(res), want)
		}
	}
}

func TestExecuteOutcomes(t *testing.T) {
	obj := `{"type":"object"}`
	long := strings.Repeat("é", 1000) + "END"
	r := newTestRegistry(t, RegistryOptions{MaxOutput: 100},
		&fakeTool{name: "fails", params: obj, run: func(context.Context, Invocation) (Result, error) {
			return Result{}, errors.New("disk on fire")
		}},
		&fakeTool{name: "soft_error", params: obj, run: func(context.Context, Invocation) (Result, error) {
			return Result{Text: "no such thing", IsError: true}, nil
		}},
		&fakeTool{name: "panics", params: obj, run: func(context.Context, Invocation) (Result, error) {
			panic("boom")
		}},
		&fakeTool{name: "silent", params: obj, run: func(context.Context, Invocation) (Result, error) {
			return Result{}, nil
		}},
		&fakeTool{name: "chatty", params: obj, run: func(context.Context, Invocation) (Result, error) {
			return Result{Text: long}, nil
		}},
		&fakeTool{name: "origin", params: obj, run: func(_ context.Context, inv Invocation) (Result, error) {
			return Result{Text: inv.CallID + " " + inv.Origin.Channel + ":" + inv.Origin.ChatID}, nil
		}},
	)
	origin := Origin{Channel: "telegram", ChatID: "42"}
	for _, c := range []struct {
		tool    string
		isError bool
		want    string
	}{
		{"fails", true, "Error: disk on fire"},
		{"soft_error", true, "no such thing"},
		{"panics", true, "Error: panics failed unexpectedly (internal error: boom)."},
		{"silent", false, "(no output)"},
		{"origin", false, "call_1 telegram:42"},
	} {
		res := r.Execute(context.Background(), call(c.tool, `{}`), origin)
		if res.IsError != c.isError || text(res) != c.want {
			t.Errorf("%s: got %q (error %v), want %q (error %v)", c.tool, text(res), res.IsError, c.want, c.isError)
		}
		if res.Elapsed <= 0 {
			t.Errorf("%s: Elapsed not set", c.tool)
		}
	}

	res := r.Execute(context.Background(), call("chatty", `{}`), origin)
	got := text(res)
	if !utf8.ValidString(got) {
		t.Fatal("capped output is not valid UTF-8")
	}
	if !strings.Contains(got, "[... 903 characters cut: output exceeded the 100-character limit ...]") {
		t.Fatalf("capped output lacks the marker: %q", got)
	}
	if !strings.HasPrefix(got, strings.Repeat("é", 66)) || !strings.HasSuffix(got, "END") {
		t.Fatalf("capped output should keep head and tail: %q", got)
	}
}

func TestExecuteTimeout(t *testing.T) {
	release := make(chan struct{})
	obj := `{"type":"object"}`
	r := newTestRegistry(t, RegistryOptions{Timeout: 20 * time.Millisecond},
		&fakeTool{name: "polite", params: obj, run: func(ctx context.Context, _ Invocation) (Result, error) {
			<-ctx.Done()
			return Result{}, ctx.Err()
		}},
		&fakeTool{name: "stubborn", params: obj, run: func(context.Context, Invocation) (Result, error) {
			<-release // ignores its context
			return Result{Text: "late"}, nil
		}},
	)
	for _, name := range []string{"polite", "stubborn"} {
		res := r.Execute(context.Background(), call(name, `{}`), Origin{})
		if !res.IsError || !strings.Contains(text(res), name+" timed out after 20ms") {
			t.Fatalf("%s: got %q, want a timeout error", name, text(res))
		}
	}
	// The stubborn call is still running; Wait reports it until it ends.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := r.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with a call still running = %v", err)
	}
	close(release)
	if err := r.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestExecuteCancelled(t *testing.T) {
	started := make(chan struct{})
	r := newTestRegistry(t, RegistryOptions{},
		&fakeTool{name: "waits", params: `{"type":"object"}`, run: func(ctx context.Context, _ Invocation) (Result, error) {
			close(started)
			<-ctx.Done()
			return Result{}, ctx.Err()
		}})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-started
		cancel()
	}()
	res := r.Execute(ctx, call("waits", `{}`), Origin{})
	if !res.IsError || !strings.Contains(text(res), "cancelled") {
		t.Fatalf("got %q, want a cancellation error", text(res))
	}
	if err := r.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestRegisterRules(t *testing.T) {
	r := newTestRegistry(t, RegistryOptions{}, &fakeTool{name: "taken", params: `{"type":"object"}`})
	for _, c := range []struct {
		name, params, want string
	}{
		{"taken", `{"type":"object"}`, "already registered"},
		{"bad name!", `{"type":"object"}`, "name must be"},
		{"", `{"type":"object"}`, "name must be"},
		{"arr", `{"type":"array"}`, `"type": "object"`},
		{"broken", `{"type":`, "parameters"},
		{"badref", `{"type":"object","properties":{"x":{"$ref":"#/$defs/missing"}}}`, "schema"},
	} {
		err := r.Register(&fakeTool{name: c.name, params: c.params})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Register(%q, %s) = %v, want an error containing %q", c.name, c.params, err, c.want)
		}
	}
	// No parameters at all means "no arguments".
	if err := r.Register(&fakeTool{name: "noargs"}); err != nil {
		t.Fatal(err)
	}
	res := r.Execute(context.Background(), call("noargs", ``), Origin{})
	if res.IsError || text(res) != "{}" {
		t.Fatalf("noargs: %q", text(res))
	}
	// An older draft declared by an MCP server still validates.
	if err := r.Register(&fakeTool{name: "draft4", params: `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"n":{"type":"integer"}}}`}); err != nil {
		t.Fatal(err)
	}
	if res := r.Execute(context.Background(), call("draft4", `{"n":"x"}`), Origin{}); !res.IsError {
		t.Fatalf("draft4 accepted a bad argument: %q", text(res))
	}
}

func TestSpecsAndViews(t *testing.T) {
	r := newTestRegistry(t, RegistryOptions{},
		&fakeTool{name: "read_file", params: "{\n  \"type\": \"object\"\n}", ro: true},
		&fakeTool{name: "message", params: `{"type":"object"}`},
		&fakeTool{name: "exec", params: `{"type":"object"}`},
	)
	first, _ := json.Marshal(r.Specs())
	second, _ := json.Marshal(r.Specs())
	if string(first) != string(second) {
		t.Fatal("Specs differ between calls")
	}
	if names := fmt.Sprint(r.names()); names != "[exec message read_file]" {
		t.Fatalf("names = %s, want sorted", names)
	}
	if p := string(r.Specs()[2].Parameters); p != `{"type":"object"}` {
		t.Fatalf("parameters not compacted: %s", p)
	}
	if !r.ReadOnly("read_file") || r.ReadOnly("exec") || r.ReadOnly("nope") {
		t.Fatal("ReadOnly wrong")
	}

	sub := r.Without("message")
	if sub.Has("message") || !sub.Has("exec") || !r.Has("message") {
		t.Fatal("Without: wrong visibility")
	}
	if names := fmt.Sprint(sub.names()); names != "[exec read_file]" {
		t.Fatalf("view names = %s", names)
	}
	res := sub.Execute(context.Background(), call("message", `{}`), Origin{})
	if !res.IsError || !strings.Contains(text(res), `unknown tool "message"`) {
		t.Fatalf("hidden tool ran through the view: %q", text(res))
	}
	// Tools added later show in the view; hidden ones stay hidden.
	if err := r.Register(&fakeTool{name: "mcp_x_y", params: `{"type":"object"}`}); err != nil {
		t.Fatal(err)
	}
	if !sub.Has("mcp_x_y") || sub.Without("exec").Has("message") {
		t.Fatal("view does not follow the registry")
	}
	r.Unregister("mcp_x_y")
	if sub.Has("mcp_x_y") || r.Has("mcp_x_y") {
		t.Fatal("Unregister did not remove the tool")
	}
}

// TestSpecsFollowRegistrations changes the tool set step by step, through
// the registry and through a view, and checks that Specs of both always
// show the current set, although each caches its result between changes.
func TestSpecsFollowRegistrations(t *testing.T) {
	obj := `{"type":"object"}`
	r := newTestRegistry(t, RegistryOptions{}, &fakeTool{name: "c", params: obj}, &fakeTool{name: "a", params: obj})
	view := r.Without("b")
	register := func(reg *Registry, name string) func(t *testing.T) {
		return func(t *testing.T) {
			if err := reg.Register(&fakeTool{name: name, params: obj}); err != nil {
				t.Fatal(err)
			}
		}
	}
	steps := []struct {
		name           string
		do             func(t *testing.T)
		want, wantView string
	}{
		{"as built", func(*testing.T) {}, "a c", "a c"},
		{"register a tool the view hides", register(r, "b"), "a b c", "a c"},
		{"register another", register(r, "d"), "a b c d", "a c d"},
		{"unregister", func(*testing.T) { r.Unregister("a") }, "b c d", "c d"},
		{"unregister a missing tool", func(*testing.T) { r.Unregister("zz") }, "b c d", "c d"},
		{"register through the view", register(view, "e"), "b c d e", "c d e"},
		{"unregister through the view", func(*testing.T) { view.Unregister("d") }, "b c e", "c e"},
		{"register a tool again", register(r, "a"), "a b c e", "a c e"},
	}
	names := func(specs []llm.ToolSpec) string {
		var out []string
		for _, s := range specs {
			out = append(out, s.Name)
		}
		return strings.Join(out, " ")
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			step.do(t)
			for _, c := range []struct {
				reg  *Registry
				want string
			}{{r, step.want}, {view, step.wantView}} {
				first := c.reg.Specs()
				if got := names(first); got != c.want {
					t.Fatalf("Specs = %q, want %q", got, c.want)
				}
				// A caller appending to its result must not reach the
				// cached slice.
				grown := append(first, llm.ToolSpec{Name: "appended"})
				second := c.reg.Specs()
				if got := names(second); got != c.want {
					t.Fatalf("Specs after a caller appended = %q, want %q", got, c.want)
				}
				if &grown[0] == &second[0] {
					t.Fatalf("an append to the result wrote into the cached slice")
				}
				if &first[0] != &second[0] {
					t.Errorf("Specs built again although no tool changed")
				}
			}
		})
	}
}

// Tools come and go (MCP servers reconnect) while calls run; run with -race.
func TestConcurrentRegisterExecute(t *testing.T) {
	r := newTestRegistry(t, RegistryOptions{}, &fakeTool{name: "stable", params: echoParams})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 200 {
				name := fmt.Sprintf("dyn_%d_%d", w, i%5)
				_ = r.Register(&fakeTool{name: name, params: `{"type":"object"}`})
				r.Execute(context.Background(), call(name, `{}`), Origin{})
				r.Unregister(name)
			}
		})
		wg.Go(func() {
			for range 200 {
				res := r.Execute(context.Background(), call("stable", `{"path":"x"}`), Origin{})
				if res.IsError {
					t.Errorf("stable tool failed: %q", text(res))
					return
				}
				_ = r.Specs()
				_ = r.Without("stable").Specs()
			}
		})
	}
	wg.Wait()
	if err := r.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestCapMiddle(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
		cut  int
	}{
		{"short", 10, "short", 0},
		{"exactly10!", 10, "exactly10!", 0},
		{"abcdefghijkl", 9, "abcdef\n\n[... 3 characters cut: output exceeded the 9-character limit ...]\n\njkl", 3},
		{"ääääää", 3, "ää\n\n[... 3 characters cut: output exceeded the 3-character limit ...]\n\nä", 3},
	} {
		got, cut := capMiddle(c.in, c.max)
		if got != c.want || cut != c.cut {
			t.Errorf("capMiddle(%q, %d) = %q, %d; want %q, %d", c.in, c.max, got, cut, c.want, c.cut)
		}
	}
}

func TestExecuteEmptyRegistry(t *testing.T) {
	r := newTestRegistry(t, RegistryOptions{})
	res := r.Execute(context.Background(), call(strings.Repeat("x", 300), `{}`), Origin{})
	if !res.IsError || !strings.HasSuffix(text(res), `...". No tools are available.`) {
		t.Fatalf("got %q", text(res))
	}
}

// The daemon's own tokens and keys never reach the model, the session or
// the chat through a tool's output (a .env in the workspace, a log file).
func TestExecuteRedactsSecrets(t *testing.T) {
	const key = "sk-live-0123456789abcdef"
	obj := `{"type":"object"}`
	r := newTestRegistry(t, RegistryOptions{Redact: func(s string) string { return strings.ReplaceAll(s, key, "[REDACTED]") }},
		&fakeTool{name: "cat_env", params: obj, run: func(context.Context, Invocation) (Result, error) {
			return Result{Text: "OPENAI_API_KEY=" + key + "\nDEBUG=1"}, nil
		}},
		&fakeTool{name: "fails", params: obj, run: func(context.Context, Invocation) (Result, error) {
			return Result{}, errors.New("auth failed for " + key)
		}},
	)
	for _, name := range []string{"cat_env", "fails"} {
		res := r.Execute(context.Background(), call(name, `{}`), Origin{})
		if got := text(res); strings.Contains(got, key) || !strings.Contains(got, "[REDACTED]") {
			t.Errorf("%s result = %q, want the key redacted", name, got)
		}
	}
}

func TestValidToolName(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{strings.Repeat("a", 64), true},
		{strings.Repeat("a", 65), false},
		{"", false},
		{"read_file-2", true},
		{"mcp.tool", false},
	}
	for _, tt := range tests {
		if got := validToolName(tt.in); got != tt.want {
			t.Errorf("validToolName(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
