package api_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

func userMsg(s string) openai.ChatCompletionMessage {
	return openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: s}
}

func TestNonStreamedAnswerWithUsageInTheUsersSession(t *testing.T) {
	h := newHarness(t)
	h.script.Push(fakellm.Reply{Text: "Hello **Ann**.", InputTokens: 120, OutputTokens: 7})
	resp, err := h.client(webuiToken).CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Model: "nanobot", User: "ann", Messages: []openai.ChatCompletionMessage{
			{Role: openai.ChatMessageRoleSystem, Content: "You are a client-side prompt."},
			userMsg("hi"),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 1 || resp.Choices[0].Message.Content != "Hello **Ann**." || resp.Choices[0].FinishReason != openai.FinishReasonStop {
		t.Fatalf("answer = %+v", resp.Choices)
	}
	if resp.Usage.PromptTokens != 120 || resp.Usage.CompletionTokens != 7 || resp.Usage.TotalTokens != 127 {
		t.Errorf("usage = %+v", resp.Usage)
	}
	if resp.Model != "nanobot" || !strings.HasPrefix(resp.ID, "chatcmpl-") || resp.Object != "chat.completion" {
		t.Errorf("envelope = %q %q %q", resp.Model, resp.ID, resp.Object)
	}
	msgs := h.session("api:webui:ann")
	if len(msgs) != 2 || !strings.HasSuffix(msgs[0].Text(), "\nhi") || msgs[1].Text() != "Hello **Ann**." {
		t.Fatalf("session api:webui:ann = %+v", msgs)
	}
	if req := h.script.Requests()[0]; strings.Contains(req.System, "client-side prompt") || len(req.Messages) != 1 {
		t.Errorf("the client's system message reached the model: %+v", req)
	}
}

func TestStreamedToolTurnShowsTextOnceAndHintsAsReasoning(t *testing.T) {
	h := newHarness(t)
	h.writeFile("notes.md", "buy milk")
	h.script.Push(
		fakellm.Reply{Text: "Let me look.", ToolCalls: []fakellm.Call{{ID: "c1", Name: "read_file", Args: `{"path":"notes.md"}`}},
			InputTokens: 100, OutputTokens: 10},
		fakellm.Reply{Text: "Your note says: buy milk.", Chunk: 3, InputTokens: 150, OutputTokens: 8},
	)
	stream, err := h.client(webuiToken).CreateChatCompletionStream(context.Background(), openai.ChatCompletionRequest{
		Model: "nanobot", Stream: true, StreamOptions: &openai.StreamOptions{IncludeUsage: true},
		Messages: []openai.ChatCompletionMessage{userMsg("what do my notes say?")},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stream.Close() }()
	var content, reasoning strings.Builder
	var finish openai.FinishReason
	var use *openai.Usage
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if chunk.Usage != nil {
			use = chunk.Usage
		}
		for _, c := range chunk.Choices {
			content.WriteString(c.Delta.Content)
			reasoning.WriteString(c.Delta.ReasoningContent)
			if c.FinishReason != "" {
				finish = c.FinishReason
			}
		}
	}
	if got := content.String(); got != "Let me look.\n\nYour note says: buy milk." {
		t.Errorf("streamed content = %q", got)
	}
	if got := reasoning.String(); got != "🔧 read_file notes.md\n" {
		t.Errorf("streamed reasoning = %q", got)
	}
	if finish != openai.FinishReasonStop {
		t.Errorf("finish reason = %q", finish)
	}
	if use == nil || use.PromptTokens != 250 || use.CompletionTokens != 18 {
		t.Errorf("usage = %+v", use)
	}
	// A request without a session leaves no file behind.
	if files := h.sessionFiles(); len(files) != 0 {
		t.Errorf("one-off turn left %v", files)
	}
}

func TestResentHistoryIsIgnoredOnceTheSessionHasIt(t *testing.T) {
	h := newHarness(t)
	c := h.client(webuiToken)
	h.script.Push(fakellm.Reply{Text: "Noted, Ann."}, fakellm.Reply{Text: "You are Ann."})
	// A client that moves an existing conversation here: the new session
	// takes its history.
	conv := []openai.ChatCompletionMessage{
		userMsg("my name is Ann"),
		{Role: openai.ChatMessageRoleAssistant, Content: "Hi Ann (said elsewhere)."},
		userMsg("remember it"),
	}
	if _, err := c.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{Model: "nanobot", User: "s1", Messages: conv}); err != nil {
		t.Fatal(err)
	}
	// The next request re-sends everything, with the client's copy of the
	// answer edited: only the last user message is new.
	conv = append(conv, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: "edited by the client"}, userMsg("who am I?"))
	resp, err := c.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{Model: "nanobot", User: "s1", Messages: conv})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Message.Content != "You are Ann." {
		t.Fatalf("answer = %q", resp.Choices[0].Message.Content)
	}
	var got []string
	for _, m := range h.session("api:webui:s1") {
		text := m.Text()
		if i := strings.LastIndex(text, "\n"); i >= 0 && m.Role == llm.RoleUser && strings.HasPrefix(text, "[") {
			text = text[i+1:] // drop the context prefix
		}
		got = append(got, string(m.Role)+":"+text)
	}
	want := []string{"user:my name is Ann", "assistant:Hi Ann (said elsewhere).", "user:remember it", "assistant:Noted, Ann.",
		"user:who am I?", "assistant:You are Ann."}
	if !slices.Equal(got, want) {
		t.Fatalf("session =\n%q\nwant\n%q", got, want)
	}
	second := h.script.Requests()[1].Messages
	if len(second) != 5 || second[3].Text != "Noted, Ann." {
		t.Errorf("the model saw %+v; want the session's record, not the client's edit", second)
	}
}

func TestSessionHeaderWinsAndKeysKeepSessionsApart(t *testing.T) {
	h := newHarness(t)
	h.script.Func = func(fakellm.Request) fakellm.Reply { return fakellm.Reply{Text: "ok"} }
	for _, tok := range []string{webuiToken, scriptToken} {
		code, body := h.raw(tok, `{"model":"nanobot","user":"ignored","messages":[{"role":"user","content":"hi"}]}`,
			"X-Session-Id", "shared")
		if code != 200 {
			t.Fatalf("status %d: %s", code, body)
		}
	}
	if n := len(h.session("api:webui:shared")); n != 2 {
		t.Errorf("api:webui:shared has %d messages, want 2", n)
	}
	if n := len(h.session("api:script:shared")); n != 2 {
		t.Errorf("api:script:shared has %d messages, want 2", n)
	}
	if n := len(h.session("api:webui:ignored")); n != 0 {
		t.Errorf("the user field was used although X-Session-Id was set")
	}
}

func TestModelPicksARouteForTheTurn(t *testing.T) {
	h := newHarness(t)
	h.script.Push(fakellm.Reply{Text: "smart"})
	resp, err := h.client(webuiToken).CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Model: "smart", Messages: []openai.ChatCompletionMessage{userMsg("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Model != "smart" || h.script.Requests()[0].Model != "gpt-4.1" {
		t.Errorf("model %q answered by %q; want the smart route (gpt-4.1)", resp.Model, h.script.Requests()[0].Model)
	}
	models, err := h.client(scriptToken).ListModels(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range models.Models {
		ids = append(ids, m.ID)
	}
	if !slices.Equal(ids, []string{"nanobot", "smart"}) {
		t.Errorf("models = %v", ids)
	}
}

func TestCommandsAnswerInASession(t *testing.T) {
	h := newHarness(t)
	resp, err := h.client(webuiToken).CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Model: "nanobot", User: "cmd", Messages: []openai.ChatCompletionMessage{userMsg("/status")}})
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Choices[0].Message.Content; !strings.Contains(c, "Model: openai/gpt-4o-mini") {
		t.Errorf("/status answered %q", c)
	}
	if n := len(h.script.Requests()); n != 0 {
		t.Errorf("a command called the model %d times", n)
	}
}

func TestRequestsOfOneSessionAreAnsweredInTurnNotMerged(t *testing.T) {
	h := newHarness(t)
	release := make(chan struct{})
	var once sync.Once
	h.script.Func = func(r fakellm.Request) fakellm.Reply {
		if strings.HasSuffix(r.LastUserText(), "first") {
			<-release
		}
		return fakellm.Reply{Text: "re: " + r.LastUserText()[strings.LastIndex(r.LastUserText(), "\n")+1:]}
	}
	c := h.client(webuiToken)
	answers := make([]string, 2)
	var wg sync.WaitGroup
	for i, q := range []string{"first", "second"} {
		if i == 1 {
			h.waitUntil("the first turn at the model", func() bool { return len(h.script.Requests()) == 1 })
		}
		wg.Go(func() {
			resp, err := c.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
				Model: "nanobot", User: "busy", Messages: []openai.ChatCompletionMessage{userMsg(q)}})
			if err != nil {
				t.Error(err)
				return
			}
			answers[i] = resp.Choices[0].Message.Content
		})
		if i == 1 {
			once.Do(func() { close(release) })
		}
	}
	wg.Wait()
	if answers[0] != "re: first" || answers[1] != "re: second" {
		t.Fatalf("answers = %q; each request gets its own turn", answers)
	}
	if n := len(h.session("api:webui:busy")); n != 4 {
		t.Errorf("session has %d messages, want two turns of 2", n)
	}
}

func TestClientGoneMidStreamTurnFinishesAndIsSavedOnce(t *testing.T) {
	h := newHarness(t)
	h.script.Push(fakellm.Reply{Text: strings.Repeat("word ", 60), Chunk: 5, ChunkDelay: 2e6})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := h.client(webuiToken)
	stream, err := c.CreateChatCompletionStream(ctx, openai.ChatCompletionRequest{
		Model: "nanobot", User: "gone", Stream: true, Messages: []openai.ChatCompletionMessage{userMsg("talk")}})
	if err != nil {
		t.Fatal(err)
	}
	for got := ""; !strings.Contains(got, "word"); {
		chunk, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if len(chunk.Choices) > 0 {
			got += chunk.Choices[0].Delta.Content
		}
	}
	cancel()
	_ = stream.Close()
	h.waitUntil("the turn saved", func() bool { return len(h.session("api:webui:gone")) == 2 })
	if msgs := h.session("api:webui:gone"); msgs[1].Text() != strings.Repeat("word ", 60) {
		t.Fatalf("saved answer = %q", msgs[1].Text())
	}
	// The session is free again, and the next answer carries only itself.
	h.script.Push(fakellm.Reply{Text: "next"})
	resp, err := c.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Model: "nanobot", User: "gone", Messages: []openai.ChatCompletionMessage{userMsg("talk"), userMsg("again")}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Message.Content != "next" {
		t.Errorf("answer after a disconnect = %q", resp.Choices[0].Message.Content)
	}
	if n := len(h.session("api:webui:gone")); n != 4 {
		t.Errorf("session has %d messages, want 4", n)
	}
}

func TestGoOpenAIClientSeesErrors(t *testing.T) {
	h := newHarness(t)
	cases := []struct {
		name   string
		token  string
		model  string
		status int
		code   string
	}{
		{"wrong key", "sk-not-a-key-0123456789", "nanobot", 401, "invalid_api_key"},
		{"unknown model", webuiToken, "gpt-5", 404, "model_not_found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.client(tc.token).CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
				Model: tc.model, Messages: []openai.ChatCompletionMessage{userMsg("hi")}})
			var apiErr *openai.APIError
			if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != tc.status || apiErr.Code != tc.code {
				t.Fatalf("err = %#v; want status %d code %s", err, tc.status, tc.code)
			}
		})
	}
	// A failed turn: 500 with the agent's words, in both modes.
	h.script.Push(fakellm.Reply{Status: 500, ErrorMessage: "internal stack trace at db.go:42"},
		fakellm.Reply{Status: 500, ErrorMessage: "internal stack trace at db.go:42"})
	_, err := h.client(webuiToken).CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Model: "nanobot", Messages: []openai.ChatCompletionMessage{userMsg("hi")}})
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 500 || strings.Contains(apiErr.Message, "db.go") ||
		!strings.Contains(apiErr.Message, "try again") {
		t.Fatalf("failed turn, non-streamed: %#v", err)
	}
	stream, err := h.client(webuiToken).CreateChatCompletionStream(context.Background(), openai.ChatCompletionRequest{
		Model: "nanobot", Stream: true, Messages: []openai.ChatCompletionMessage{userMsg("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stream.Close() }()
	for {
		_, err = stream.Recv()
		if err != nil {
			break
		}
	}
	if errors.Is(err, io.EOF) || strings.Contains(err.Error(), "db.go") || !strings.Contains(err.Error(), "try again") {
		t.Fatalf("failed turn, streamed: %v", err)
	}
}

func TestInlineImageReachesTheModel(t *testing.T) {
	h := newHarness(t)
	h.script.Push(fakellm.Reply{Text: "A tiny picture."})
	body := `{"model":"nanobot","messages":[{"role":"user","content":[{"type":"text","text":"what is this?"},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgoAAAANSUhEUg=="}}]}]}`
	if code, b := h.raw(webuiToken, body, "Authorization", "bearer "+webuiToken); code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	m := h.script.Requests()[0].Messages[0]
	if m.Images != 1 || !strings.HasSuffix(m.Text, "what is this?") {
		t.Errorf("the model got %+v; want the text and one image", m)
	}
}

func TestClientGoneBeforeANonStreamedAnswerLosesNothing(t *testing.T) {
	h := newHarness(t)
	release := make(chan struct{})
	h.script.Func = func(r fakellm.Request) fakellm.Reply {
		if strings.HasSuffix(r.LastUserText(), "wait") {
			<-release
		}
		return fakellm.Reply{Text: "done: " + r.LastUserText()[strings.LastIndex(r.LastUserText(), "\n")+1:]}
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	c := h.client(webuiToken)
	go func() {
		_, err := c.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "nanobot", User: "left",
			Messages: []openai.ChatCompletionMessage{userMsg("wait")}})
		errc <- err
	}()
	h.waitUntil("the turn at the model", func() bool { return len(h.script.Requests()) == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("client error = %v", err)
	}
	close(release)
	h.waitUntil("the turn saved", func() bool { return len(h.session("api:webui:left")) == 2 })
	resp, err := c.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{Model: "nanobot", User: "left",
		Messages: []openai.ChatCompletionMessage{userMsg("wait"), userMsg("again")}})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != "done: again" {
		t.Errorf("next answer = %q; want only its own", got)
	}
	if msgs := h.session("api:webui:left"); len(msgs) != 4 || msgs[1].Text() != "done: wait" {
		t.Errorf("session = %+v", msgs)
	}
}
