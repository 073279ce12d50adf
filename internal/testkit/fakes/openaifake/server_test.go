package openaifake_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"
	"go.uber.org/goleak"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/openaifake"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testClient(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// post sends body to path with the fake's key and returns status and body.
func post(t *testing.T, fake *openaifake.Server, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, fake.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+fake.APIKey())
	req.Header.Set("Content-Type", "application/json")
	resp, err := testClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// events splits an SSE body into its data payloads and checks the framing.
func events(t *testing.T, body []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("line without data prefix: %q", line)
		}
		out = append(out, data)
	}
	return out
}

type chunk struct {
	Choices []struct {
		Delta struct {
			Role             string `json:"role"`
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
			ToolCalls        []struct {
				Index    int     `json:"index"`
				ID       *string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionTokensDetails struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	} `json:"usage"`
}

func decodeChunks(t *testing.T, evs []string) []chunk {
	t.Helper()
	var out []chunk
	for _, e := range evs {
		if e == "[DONE]" {
			continue
		}
		var c chunk
		if err := json.Unmarshal([]byte(e), &c); err != nil {
			t.Fatalf("chunk %q: %v", e, err)
		}
		out = append(out, c)
	}
	return out
}

const userHi = `"messages":[{"role":"user","content":"hi"}]`

func TestStreamWireFormat(t *testing.T) {
	script := &fakellm.Script{}
	script.Push(fakellm.Reply{Thinking: "pondering deeply", Text: "Hello, wire!", Chunk: 4, InputTokens: 50, OutputTokens: 9, CachedTokens: 20})
	fake := openaifake.New(t, script)
	status, body := post(t, fake, "/chat/completions", `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},`+userHi+`}`)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	evs := events(t, body)
	if evs[len(evs)-1] != "[DONE]" {
		t.Fatalf("last event = %q", evs[len(evs)-1])
	}
	chunks := decodeChunks(t, evs)
	var text, thinking strings.Builder
	var finishes []string
	for i, c := range chunks[:len(chunks)-1] {
		if c.Usage != nil {
			t.Errorf("chunk %d carries usage before the end", i)
		}
		for _, ch := range c.Choices {
			text.WriteString(ch.Delta.Content)
			thinking.WriteString(ch.Delta.ReasoningContent)
			if ch.FinishReason != nil {
				finishes = append(finishes, *ch.FinishReason)
			}
		}
	}
	if text.String() != "Hello, wire!" || thinking.String() != "pondering deeply" {
		t.Errorf("text %q thinking %q", text.String(), thinking.String())
	}
	if chunks[0].Choices[0].Delta.Role != "assistant" {
		t.Errorf("first chunk = %+v", chunks[0])
	}
	if len(chunks) < 8 {
		t.Errorf("text was not split into chunks: %d chunks", len(chunks))
	}
	if !slices.Equal(finishes, []string{"stop"}) {
		t.Errorf("finish reasons = %v", finishes)
	}
	last := chunks[len(chunks)-1]
	if len(last.Choices) != 0 || last.Usage == nil || last.Usage.PromptTokens != 50 || last.Usage.CompletionTokens != 9 ||
		last.Usage.PromptTokensDetails.CachedTokens != 20 || last.Usage.CompletionTokensDetails.ReasoningTokens != 4 {
		t.Errorf("usage chunk = %+v", last)
	}
	if !strings.Contains(evs[1], `"usage":null`) {
		t.Errorf("chunks before the usage chunk should say usage:null like OpenAI: %s", evs[1])
	}
}

func TestStreamWithoutIncludeUsage(t *testing.T) {
	fake := openaifake.New(t, nil)
	_, body := post(t, fake, "/chat/completions", `{"model":"gpt-4o-mini","stream":true,`+userHi+`}`)
	if bytes.Contains(body, []byte(`"usage"`)) {
		t.Errorf("usage sent without stream_options.include_usage: %s", body)
	}
}

func TestToolCallFragmentsInterleave(t *testing.T) {
	script := &fakellm.Script{}
	script.Push(fakellm.Reply{ToolCalls: []fakellm.Call{
		{ID: "call_a", Name: "read_file", Args: `{"path":"a.md"}`},
		{Name: "exec", Args: `{"command":"ls"}`},
	}, Chunk: 5})
	fake := openaifake.New(t, script)
	_, body := post(t, fake, "/chat/completions", `{"model":"gpt-4o-mini","stream":true,`+userHi+`}`)
	var order []int
	args := map[int]string{}
	pieces := map[int]int{}
	var ids []*string
	var finish string
	for _, c := range decodeChunks(t, events(t, body)) {
		for _, ch := range c.Choices {
			for _, tc := range ch.Delta.ToolCalls {
				order = append(order, tc.Index)
				if tc.Function.Name != "" {
					ids = append(ids, tc.ID)
				}
				if tc.Function.Arguments != "" {
					pieces[tc.Index]++
				}
				args[tc.Index] += tc.Function.Arguments
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	if args[0] != `{"path":"a.md"}` || args[1] != `{"command":"ls"}` {
		t.Errorf("args = %v", args)
	}
	if pieces[0] < 2 || pieces[1] < 2 {
		t.Errorf("arguments not split: %v", pieces)
	}
	if !slices.Equal(order[:4], []int{0, 1, 0, 1}) {
		t.Errorf("fragments not interleaved: %v", order)
	}
	if len(ids) != 2 || ids[0] == nil || *ids[0] != "call_a" || ids[1] != nil {
		t.Errorf("ids: first should be call_a, second absent: %v", ids)
	}
	if finish != "tool_calls" {
		t.Errorf("finish = %q", finish)
	}
}

func TestFaultsOnTheWire(t *testing.T) {
	cases := []struct {
		name  string
		reply fakellm.Reply
		check func(t *testing.T, body []byte)
	}{
		{"truncate", fakellm.Reply{Text: "cut here", Truncate: true}, func(t *testing.T, body []byte) {
			if bytes.Contains(body, []byte("[DONE]")) || bytes.Contains(body, []byte("finish_reason\":\"")) {
				t.Errorf("truncated stream finished: %s", body)
			}
		}},
		{"mid-stream error", fakellm.Reply{Text: "abc", MidStreamError: "boom"}, func(t *testing.T, body []byte) {
			evs := events(t, body)
			if last := evs[len(evs)-1]; !strings.HasPrefix(last, `{"error":{"message":"boom","type":"server_error"`) {
				t.Errorf("last event = %q", last)
			}
		}},
		{"garbage", fakellm.Reply{Text: "abcdefghijkl", Chunk: 4, Garbage: true}, func(t *testing.T, body []byte) {
			bad := 0
			for _, e := range events(t, body) {
				if e != "[DONE]" && !json.Valid([]byte(e)) {
					bad++
				}
			}
			if bad != 1 {
				t.Errorf("%d invalid chunks, want 1", bad)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			script := &fakellm.Script{}
			script.Push(tc.reply)
			fake := openaifake.New(t, script)
			status, body := post(t, fake, "/chat/completions", `{"model":"gpt-4o-mini","stream":true,`+userHi+`}`)
			if status != 200 {
				t.Fatalf("status = %d", status)
			}
			tc.check(t, body)
		})
	}
}

func TestErrorStatusWithRetryAfter(t *testing.T) {
	script := &fakellm.Script{}
	script.Push(fakellm.Reply{Status: 429, RetryAfter: "7"})
	fake := openaifake.New(t, script)
	req, _ := http.NewRequest(http.MethodPost, fake.URL()+"/chat/completions", strings.NewReader(`{"model":"m","stream":true,`+userHi+`}`))
	req.Header.Set("Authorization", "Bearer "+fake.APIKey())
	resp, err := testClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    string `json:"code"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "7" || body.Error.Code != "rate_limit_exceeded" || body.Error.Message == "" {
		t.Errorf("status %d, retry-after %q, body %+v", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
}

// TestStrictness: requests OpenAI refuses get OpenAI's 400 and never reach
// the script.
func TestStrictness(t *testing.T) {
	call := func(id string) string {
		return `{"id":"` + id + `","type":"function","function":{"name":"f","arguments":"{}"}}`
	}
	tool := func(id string) string { return `{"role":"tool","tool_call_id":"` + id + `","content":"r"}` }
	asst := func(ids ...string) string {
		var cs []string
		for _, id := range ids {
			cs = append(cs, call(id))
		}
		return `{"role":"assistant","tool_calls":[` + strings.Join(cs, ",") + `]}`
	}
	user := `{"role":"user","content":"hi"}`
	msgs := func(ms ...string) string {
		return `{"model":"gpt-4o-mini","messages":[` + strings.Join(ms, ",") + `]}`
	}
	cases := []struct {
		name, body, want string // want "" means accepted
	}{
		{"calls answered in any order", msgs(user, asst("a", "b"), tool("b"), tool("a"), user), ""},
		{"missing tool result", msgs(user, asst("a", "b"), tool("a"), user), "did not have response messages: b"},
		{"missing tool result at the end", msgs(user, asst("a")), "did not have response messages: a"},
		{"tool without a call", msgs(user, tool("a")), "must be a response to a preceeding message with 'tool_calls'"},
		{"tool for another id", msgs(user, asst("a"), tool("a"), tool("z")), "must be a response to a preceeding"},
		{"tool after a user message", msgs(user, asst("a"), tool("a"), user, tool("a")), "must be a response to a preceeding"},
		{"unknown role", msgs(`{"role":"robot","content":"x"}`), "Invalid value: 'robot'"},
		{"assistant with nothing", msgs(user, `{"role":"assistant"}`), "expected a string, got null"},
		{"user without content", msgs(`{"role":"user"}`), "Missing required parameter"},
		{"unknown part type", msgs(`{"role":"user","content":[{"type":"video","text":"x"}]}`), "Invalid value: 'video'"},
		{"no messages", `{"model":"gpt-4o-mini","messages":[]}`, "too short"},
		{"no model", `{"messages":[` + user + `]}`, "must provide a model"},
		{"bad json", `{"model":`, "could not parse the JSON body"},
		{"max_tokens on o3", `{"model":"o3-mini","max_tokens":5,"messages":[` + user + `]}`, "Use 'max_completion_tokens' instead"},
		{"max_tokens on gpt-5", `{"model":"gpt-5","max_tokens":5,"messages":[` + user + `]}`, "'max_tokens' is not supported"},
		{"max_completion_tokens on o3", `{"model":"o3-mini","max_completion_tokens":5,"messages":[` + user + `]}`, ""},
		{"temperature on o1", `{"model":"o1","temperature":0.5,"messages":[` + user + `]}`, "'temperature' does not support 0.5"},
		{"max_tokens on gpt-4o", `{"model":"gpt-4o","max_tokens":5,"temperature":0,"messages":[` + user + `]}`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			script := &fakellm.Script{}
			script.Push(fakellm.Reply{Text: "ok"})
			fake := openaifake.New(t, script)
			status, body := post(t, fake, "/chat/completions", tc.body)
			if tc.want == "" {
				if status != 200 || script.Pending() != 0 {
					t.Fatalf("status %d, body %s", status, body)
				}
				return
			}
			var e struct {
				Error struct {
					Message string `json:"message"`
					Type    string `json:"type"`
				} `json:"error"`
			}
			_ = json.Unmarshal(body, &e)
			if status != 400 || !strings.Contains(e.Error.Message, tc.want) || e.Error.Type != "invalid_request_error" {
				t.Errorf("status %d, body %s; want 400 containing %q", status, body, tc.want)
			}
			if script.Pending() != 1 || len(script.Requests()) != 0 {
				t.Errorf("a refused request reached the script")
			}
			if rej := fake.Rejected(); len(rej) != 1 || rej[0].Status != 400 {
				t.Errorf("rejected = %+v", rej)
			}
		})
	}
}

func TestAuth(t *testing.T) {
	cases := []struct {
		name   string
		opts   []openaifake.Option
		header string
		status int
		want   string
	}{
		{"no key", nil, "", 401, "You didn't provide an API key"},
		{"wrong key", nil, "Bearer sk-wrong-key-abcdef", 401, "Incorrect API key provided: sk-************cdef"},
		{"right key", nil, "Bearer " + openaifake.DefaultAPIKey, 200, ""},
		{"custom key", []openaifake.Option{openaifake.WithAPIKey("k-123")}, "Bearer k-123", 200, ""},
		{"keyless server", []openaifake.Option{openaifake.WithAPIKey("")}, "", 200, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := openaifake.New(t, nil, tc.opts...)
			req, _ := http.NewRequest(http.MethodGet, fake.URL()+"/models", nil)
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			resp, err := testClient(t).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.want) {
				t.Errorf("status %d body %s", resp.StatusCode, body)
			}
			if strings.Contains(string(body), "sk-wrong-key-abcdef") {
				t.Error("401 echoes the whole key")
			}
		})
	}
}

func TestUnknownPath(t *testing.T) {
	fake := openaifake.New(t, nil)
	status, body := post(t, fake, "/completions", `{}`)
	if status != 404 || !strings.Contains(string(body), "Invalid URL (POST /v1/completions)") {
		t.Errorf("status %d body %s", status, body)
	}
}

// goClient is go-openai pointed at the fake: a real OpenAI client must
// understand every answer.
func goClient(t *testing.T, fake *openaifake.Server) *goopenai.Client {
	cfg := goopenai.DefaultConfig(fake.APIKey())
	cfg.BaseURL = fake.URL()
	cfg.HTTPClient = testClient(t)
	return goopenai.NewClientWithConfig(cfg)
}

func TestNonStreaming(t *testing.T) {
	script := &fakellm.Script{}
	script.Push(
		fakellm.Reply{Text: "plain answer", InputTokens: 12, OutputTokens: 3},
		fakellm.Reply{Text: "calling", ToolCalls: []fakellm.Call{{ID: "call_1", Name: "read_file", Args: `{"path":"x"}`}}},
		fakellm.Reply{Status: 503, ErrorMessage: "overloaded"},
	)
	fake := openaifake.New(t, script)
	c := goClient(t, fake)
	req := goopenai.ChatCompletionRequest{Model: "gpt-4o-mini", Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "hi"}}}

	resp, err := c.CreateChatCompletion(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if m := resp.Choices[0].Message; m.Content != "plain answer" || resp.Choices[0].FinishReason != "stop" || resp.Usage.PromptTokens != 12 || resp.Usage.CompletionTokens != 3 {
		t.Errorf("response = %+v", resp)
	}
	resp, err = c.CreateChatCompletion(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if tc := resp.Choices[0].Message.ToolCalls; len(tc) != 1 || tc[0].ID != "call_1" || tc[0].Function.Arguments != `{"path":"x"}` || resp.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("response = %+v", resp)
	}
	_, err = c.CreateChatCompletion(context.Background(), req)
	var apiErr *goopenai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 503 || apiErr.Message != "overloaded" || apiErr.Type != "server_error" {
		t.Errorf("err = %v", err)
	}
	if got := script.Requests(); len(got) != 3 || got[0].Stream {
		t.Errorf("requests = %+v", got)
	}
}

// TestRecordedRequest checks the neutral form of a request with every kind
// of message.
func TestRecordedRequest(t *testing.T) {
	fake := openaifake.New(t, nil)
	body := `{"model":"o3-mini","max_completion_tokens":77,"stream":true,
	  "tools":[{"type":"function","function":{"name":"read_file","parameters":{}}}],
	  "tool_choice":{"type":"function","function":{"name":"read_file"}},
	  "messages":[
	    {"role":"system","content":"sys"},
	    {"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}}]},
	    {"role":"assistant","content":"ok","tool_calls":[{"id":"c1","type":"function","function":{"name":"read_file","arguments":"{\"p\":1}"}}]},
	    {"role":"tool","tool_call_id":"c1","content":"file text"},
	    {"role":"user","content":"next"}]}`
	if status, b := post(t, fake, "/chat/completions", body); status != 200 {
		t.Fatalf("status %d: %s", status, b)
	}
	got := fake.Script().Requests()[0]
	if got.Model != "o3-mini" || got.MaxTokens != 77 || !got.Stream || got.System != "sys" || got.ToolChoice != "read_file" ||
		!slices.Equal(got.Tools, []string{"read_file"}) || got.Path != "/v1/chat/completions" || got.LastUserText() != "next" {
		t.Errorf("request = %+v", got)
	}
	if len(got.Messages) != 4 || got.Messages[0].Images != 1 || got.Messages[0].Text != "look" ||
		got.Messages[1].ToolCalls[0] != (fakellm.Call{ID: "c1", Name: "read_file", Args: `{"p":1}`}) ||
		got.Messages[2].ToolResults[0] != (fakellm.Result{CallID: "c1", Content: "file text"}) {
		t.Errorf("messages = %+v", got.Messages)
	}
	if !bytes.Equal(bytes.TrimSpace(got.Raw), bytes.TrimSpace([]byte(body))) {
		t.Error("raw body not recorded verbatim")
	}
}

func TestModels(t *testing.T) {
	fake := openaifake.New(t, nil, openaifake.WithModels("m1", "m2"))
	list, err := goClient(t, fake).ListModels(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Models) != 2 || list.Models[0].ID != "m1" || list.Models[1].Object != "model" {
		t.Errorf("models = %+v", list.Models)
	}
}

func TestTranscriptions(t *testing.T) {
	fake := openaifake.New(t, nil, openaifake.WithTranscriber(func(r openaifake.TranscriptionRequest) (string, error) {
		if !bytes.HasPrefix(r.Audio, []byte("OggS")) {
			return "", errors.New("Audio file might be corrupted or unsupported")
		}
		return "remind me to buy milk", nil
	}))
	c := goClient(t, fake)
	resp, err := c.CreateTranscription(context.Background(), goopenai.AudioRequest{
		Model: goopenai.Whisper1, FilePath: "voice.ogg", Reader: bytes.NewReader([]byte("OggS voice data")), Language: "en",
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "remind me to buy milk" {
		t.Errorf("text = %q", resp.Text)
	}
	resp, err = c.CreateTranscription(context.Background(), goopenai.AudioRequest{
		Model: goopenai.Whisper1, FilePath: "voice.ogg", Reader: bytes.NewReader([]byte("OggS")), Format: goopenai.AudioResponseFormatText,
	})
	if err != nil || strings.TrimSpace(resp.Text) != "remind me to buy milk" {
		t.Errorf("text format: %q, %v", resp.Text, err)
	}
	_, err = c.CreateTranscription(context.Background(), goopenai.AudioRequest{
		Model: goopenai.Whisper1, FilePath: "noise.mp3", Reader: bytes.NewReader([]byte("not audio")),
	})
	var apiErr *goopenai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 400 || !strings.Contains(apiErr.Message, "corrupted") {
		t.Errorf("bad audio: %v", err)
	}
	got := fake.Transcriptions()
	if len(got) != 3 || got[0].Filename != "voice.ogg" || got[0].Model != "whisper-1" || got[0].Language != "en" || string(got[0].Audio) != "OggS voice data" {
		t.Errorf("recorded = %+v", got)
	}
	if status, body := post(t, fake, "/audio/transcriptions", `{}`); status != 400 || !strings.Contains(string(body), "multipart") {
		t.Errorf("non-multipart: %d %s", status, body)
	}
}

// TestDelayHonoursCancellation: a request waiting on Delay ends on the
// server as soon as the client gives up.
func TestDelayHonoursCancellation(t *testing.T) {
	script := &fakellm.Script{}
	script.Push(fakellm.Reply{Delay: time.Hour, Text: "never"})
	fake := openaifake.New(t, script)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, fake.URL()+"/chat/completions", strings.NewReader(`{"model":"m","stream":true,`+userHi+`}`))
	req.Header.Set("Authorization", "Bearer "+fake.APIKey())
	client := testClient(t)
	var wg sync.WaitGroup
	var err error
	wg.Go(func() {
		var resp *http.Response
		resp, err = client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
	})
	waitFor(t, func() bool { return fake.InFlight() == 1 })
	cancel()
	wg.Wait()
	if !errors.Is(err, context.Canceled) {
		t.Errorf("client err = %v", err)
	}
	waitFor(t, func() bool { return fake.InFlight() == 0 })
}

// TestCloseUnblocksHandlers: Close returns even while a handler is waiting
// on a long delay, and the client sees the connection end.
func TestCloseUnblocksHandlers(t *testing.T) {
	script := &fakellm.Script{}
	script.Push(fakellm.Reply{Delay: time.Hour})
	fake := openaifake.New(t, script)
	client := testClient(t)
	var wg sync.WaitGroup
	var err error
	wg.Go(func() {
		req, _ := http.NewRequest(http.MethodPost, fake.URL()+"/chat/completions", strings.NewReader(`{"model":"m",`+userHi+`}`))
		req.Header.Set("Authorization", "Bearer "+fake.APIKey())
		var resp *http.Response
		resp, err = client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
	})
	waitFor(t, func() bool { return fake.InFlight() == 1 })
	fake.Close()
	wg.Wait()
	if err == nil {
		t.Error("client got an answer from a closed server")
	}
	if fake.InFlight() != 0 {
		t.Errorf("in flight after Close = %d", fake.InFlight())
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatal("condition not reached before the deadline")
		case <-tick.C:
		}
	}
}

func TestReceivedTimeAndDiscard(t *testing.T) {
	tests := []struct {
		name    string
		discard bool
		kept    int
	}{{"recorded", false, 1}, {"discarded", true, 0}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var received time.Time
			script := &fakellm.Script{Discard: tt.discard, Func: func(r fakellm.Request) fakellm.Reply {
				received = r.Received
				return fakellm.Reply{Text: "ok"}
			}}
			fake := openaifake.New(t, script)
			before := time.Now()
			status, _ := post(t, fake, "/chat/completions", `{"model":"gpt-4o-mini","stream":true,`+userHi+`}`)
			if status != http.StatusOK {
				t.Fatalf("status %d", status)
			}
			if received.Before(before) || received.After(time.Now()) {
				t.Errorf("Received = %v, not within the call (began %v)", received, before)
			}
			if n := len(script.Requests()); n != tt.kept {
				t.Errorf("Requests() holds %d, want %d", n, tt.kept)
			}
		})
	}
}

// TestStrictArguments: WithStrictArguments answers 400 to a history whose
// tool-call arguments are not a JSON object, on both endpoints, as vLLM
// does; OpenAI itself (the default) takes them.
func TestStrictArguments(t *testing.T) {
	chat := func(args string) string {
		return `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"},` +
			`{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":` + args + `}}]},` +
			`{"role":"tool","tool_call_id":"a","content":"r"}]}`
	}
	responses := func(args string) string {
		return `{"model":"gpt-4o-mini","stream":true,"input":[{"role":"user","content":"hi"},` +
			`{"type":"function_call","call_id":"a","name":"f","arguments":` + args + `},` +
			`{"type":"function_call_output","call_id":"a","output":"r"}]}`
	}
	cases := []struct {
		name   string
		strict bool
		path   string
		body   string
		status int
	}{
		{"chat, strict, broken", true, "/chat/completions", chat(`"{\"path\": \"no"`), 400},
		{"chat, strict, not an object", true, "/chat/completions", chat(`"[1]"`), 400},
		{"chat, strict, {}", true, "/chat/completions", chat(`"{}"`), 200},
		{"chat, lenient, broken", false, "/chat/completions", chat(`"{\"path\": \"no"`), 200},
		{"responses, strict, broken", true, "/responses", responses(`"{\"path\": \"no"`), 400},
		{"responses, strict, {}", true, "/responses", responses(`"{}"`), 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var opts []openaifake.Option
			if tc.strict {
				opts = append(opts, openaifake.WithStrictArguments())
			}
			fake := openaifake.New(t, nil, opts...)
			if status, body := post(t, fake, tc.path, tc.body); status != tc.status {
				t.Errorf("status %d, want %d: %s", status, tc.status, body)
			}
		})
	}
}

// HoldAfterFirst keeps the rest of the stream back until it is closed:
// the first content chunk is readable, the second is not (checked for a
// while: a failure here is never by chance, a pass might miss a race), and
// closing the hold lets the stream finish.
func TestHoldAfterFirst(t *testing.T) {
	script := &fakellm.Script{}
	hold := make(chan struct{})
	script.Push(fakellm.Reply{Text: "first second", Chunk: 6, HoldAfterFirst: hold})
	fake := openaifake.New(t, script)
	req, err := http.NewRequest(http.MethodPost, fake.URL()+"/chat/completions",
		strings.NewReader(`{"model":"gpt-4o-mini","stream":true,`+userHi+`}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+fake.APIKey())
	req.Header.Set("Content-Type", "application/json")
	//lint:ignore bodyclose closed by the defer below; the reader goroutine hides it from the check
	resp, err := testClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string, 64) // the whole stream fits: the reader never blocks
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				lines <- data
			}
		}
	}()
	content := func(data string) string {
		var c struct {
			Choices []struct {
				Delta struct{ Content string }
			}
		}
		if json.Unmarshal([]byte(data), &c) != nil || len(c.Choices) == 0 {
			return ""
		}
		return c.Choices[0].Delta.Content
	}
	for data := range lines {
		if content(data) == "first " {
			break
		}
	}
	select {
	case data := <-lines:
		t.Fatalf("the stream went on while held: %s", data)
	case <-time.After(200 * time.Millisecond):
	}
	close(hold)
	var rest strings.Builder
	for data := range lines {
		rest.WriteString(content(data))
	}
	if rest.String() != "second" {
		t.Fatalf("after the hold: %q, want %q", rest.String(), "second")
	}
}
