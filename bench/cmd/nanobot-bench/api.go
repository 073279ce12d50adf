package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// benchAPIKey is the bearer token of the gateway's API in the api scenario.
const benchAPIKey = "sk-nanobot-bench-0123456789abcdef"

// runAPI runs the closed-loop load through the OpenAI-compatible API: each
// client posts a non-streamed chat completion in its own session (user
// "bench<chat>"), waits for the answer (and -think) and posts again. The
// model and the measurements are the load scenario's.
func runAPI(ctx context.Context, o options, clients int) (loadResult, error) {
	var res loadResult
	err := withGateway(ctx, o, setup{MaxConcurrentTurns: o.maxTurns, API: true}, func(h *harness, _ ready) error {
		tr := &http.Transport{MaxIdleConnsPerHost: clients + 1}
		defer tr.CloseIdleConnections()
		d := newDriver(h, clients)
		d.think = o.think
		d.api = &apiClient{url: "http://" + h.listen + "/v1/chat/completions", hc: &http.Client{Transport: tr, Timeout: 60 * time.Second}}
		var err error
		res, err = d.run(ctx, o.warmup, o.window)
		return err
	})
	return res, err
}

// apiClient sends the driver's turns over the API instead of Telegram.
type apiClient struct {
	url string
	hc  *http.Client
}

type apiRequest struct {
	Model    string       `json:"model"`
	User     string       `json:"user"`
	Messages []apiMessage `json:"messages"`
}

type apiMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type apiAnswer struct {
	Choices []struct {
		Message apiMessage `json:"message"`
	} `json:"choices"`
}

// turn posts the n-th message of chat st and waits for the answer.
func (a *apiClient) turn(ctx context.Context, d *driver, st *chatState, n int) (sample, error) {
	st.model.Store(0)
	st.calls.Store(0)
	body, err := json.Marshal(apiRequest{Model: "nanobot", User: fmt.Sprintf("bench%d", -st.id),
		Messages: []apiMessage{{Role: "user", Content: d.message(st, n).Text}}})
	if err != nil {
		return sample{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url, bytes.NewReader(body))
	if err != nil {
		return sample{}, err
	}
	req.Header.Set("Authorization", "Bearer "+benchAPIKey)
	req.Header.Set("Content-Type", "application/json")
	s := sample{pushed: time.Now()}
	resp, err := a.hc.Do(req)
	if err != nil {
		return s, fmt.Errorf("chat %d: %w (log: %s)", st.id, err, d.h.logf.Name())
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	s.replied = time.Now()
	if err != nil {
		return s, fmt.Errorf("chat %d: read answer: %w", st.id, err)
	}
	var ans apiAnswer
	if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &ans) != nil || len(ans.Choices) != 1 || ans.Choices[0].Message.Content != replyText {
		return s, fmt.Errorf("chat %d: answer %d %s (log: %s)", st.id, resp.StatusCode, data, d.h.logf.Name())
	}
	s.model = time.Duration(st.model.Load())
	s.calls = st.calls.Load()
	s.reqBytes = st.reqBytes.Load()
	return s, nil
}
