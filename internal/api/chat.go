package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/llm"
)

// turnRequest is a validated chat completion request.
type turnRequest struct {
	model        string
	stream       bool
	includeUsage bool
	session      string // the client's id; "" for a one-off turn
	text         string
	images       []llm.Part
	history      []llm.Message
}

// chat serves POST /v1/chat/completions.
func (s *Server) chat(w http.ResponseWriter, r *http.Request, k *apiKey, start time.Time) {
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		s.fail(w, r, k.name, start, unavailable)
		return
	}
	if aerr := s.admit(k); aerr != nil {
		s.fail(w, r, k.name, start, aerr)
		return
	}
	handedOver := false
	defer func() {
		if !handedOver {
			<-k.slots
		}
	}()
	req, aerr := s.parse(w, r)
	if aerr != nil {
		s.fail(w, r, k.name, start, aerr)
		return
	}
	id := newID()
	key := fmt.Sprintf("%s:%s:%s", Channel, k.name, req.session)
	if req.session == "" {
		key = fmt.Sprintf("%s:%s:~%s", Channel, k.name, id) // one-off: a key no client can name
	}
	unlock, aerr := s.lockSession(r.Context(), key)
	if aerr != nil {
		s.fail(w, r, k.name, start, aerr)
		return
	}
	c := newCall(id, s.cfg.ToolHints)
	c.release = func() { unlock(); <-k.slots }
	msg := bus.InboundMessage{
		Channel: Channel, SenderID: k.name, SenderName: k.name, ChatID: id, MessageID: id,
		Content: req.text, Media: req.images, SessionKey: key, Time: time.Now(),
		History: req.history, Ephemeral: req.session == "",
	}
	if req.model != DefaultModel {
		msg.Model = req.model
	}
	// From the hand-over the call belongs to the agent: it ends when the
	// answer arrives (Receive) or at shutdown, whatever the client does;
	// after turn_timeout only its handler stops waiting.
	c.timer = time.AfterFunc(s.cfg.TurnTimeout, c.expire)
	if aerr := s.hand(r, c, msg); aerr != nil {
		c.timer.Stop()
		unlock()
		s.fail(w, r, k.name, start, aerr)
		return
	}
	handedOver = true

	var outcome string
	if req.stream {
		outcome = s.stream(w, r, c, req)
	} else {
		outcome = s.whole(w, r, c, req)
	}
	s.done(r, k.name, key, start, outcome, len(c.result().streamed))
}

// hand registers c and publishes its message to the agent.
func (s *Server) hand(r *http.Request, c *call, msg bus.InboundMessage) *apiError {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return unavailable
	}
	s.calls[c.id] = c
	s.publishing.Add(1)
	s.mu.Unlock()
	defer s.publishing.Done()
	if err := s.in.PublishInbound(r.Context(), msg); err != nil {
		s.mu.Lock()
		delete(s.calls, c.id)
		s.mu.Unlock()
		if errors.Is(err, bus.ErrClosed) {
			return unavailable
		}
		return &apiError{status: 499, typ: "invalid_request_error", message: "client closed the request", outcome: "client_closed"}
	}
	return nil
}

// parse reads and checks the body.
func (s *Server) parse(w http.ResponseWriter, r *http.Request) (turnRequest, *apiError) {
	var out turnRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return out, &apiError{status: http.StatusRequestEntityTooLarge, typ: "invalid_request_error", code: "request_too_large",
				message: fmt.Sprintf("The request body is larger than this server accepts (%d bytes, api.max_body_bytes). "+
					"Start a new conversation, or send fewer or smaller images.", tooBig.Limit), outcome: "too_large"}
		}
		return out, &apiError{status: 499, typ: "invalid_request_error", message: "reading the request body failed", outcome: "client_closed"}
	}
	if !utf8.Valid(body) {
		return out, badRequest("The request body is not valid UTF-8.", "")
	}
	req, aerr := decodeRequest(body)
	if aerr != nil {
		return out, aerr
	}
	if req.Model == "" {
		return out, badRequest("you must provide a model parameter", "model")
	}
	if !slices.Contains(s.models, req.Model) {
		return out, &apiError{status: http.StatusNotFound, typ: "invalid_request_error", param: "model", code: "model_not_found",
			message: fmt.Sprintf("The model `%s` does not exist. Models here: %s.", req.Model, strings.Join(s.models, ", ")), outcome: "not_found"}
	}
	if req.N != nil && *req.N != 1 {
		return out, badRequest("n must be 1: the assistant gives one answer.", "n")
	}
	if len(req.Messages) == 0 {
		return out, badRequest("[] is too short - 'messages'", "messages")
	}
	last := len(req.Messages) - 1
	if req.Messages[last].Role != "user" {
		return out, badRequest("The last message must be the user's (role \"user\"): the assistant runs its tools itself.",
			fmt.Sprintf("messages[%d].role", last))
	}
	if last > s.cfg.MaxHistoryMessages {
		return out, badRequest(fmt.Sprintf("The request re-sends %d earlier messages; this server takes at most %d (api.max_history_messages). "+
			"Start a new conversation.", last, s.cfg.MaxHistoryMessages), "messages")
	}
	text, images, aerr := contentOf(req.Messages[last].Content, fmt.Sprintf("messages[%d].content", last))
	if aerr != nil {
		return out, aerr
	}
	if len(images) > s.cfg.MaxImages {
		return out, badRequest(fmt.Sprintf("The last message holds %d images; this server takes at most %d per request (api.max_images).",
			len(images), s.cfg.MaxImages), fmt.Sprintf("messages[%d].content", last))
	}
	if strings.TrimSpace(text) == "" && len(images) == 0 {
		return out, badRequest("The last user message is empty.", fmt.Sprintf("messages[%d].content", last))
	}
	// The re-sent history may become a new session's start (the agent
	// seeds an empty session with it): its size is capped so that one
	// request cannot pin megabytes of tiny messages in memory and on disk.
	var historyBytes int64
	for i, m := range req.Messages[:last] {
		param := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case "user", "assistant":
			t, _, aerr := contentOf(m.Content, param+".content")
			if aerr != nil {
				return out, aerr
			}
			if historyBytes += int64(len(t)); historyBytes > s.cfg.MaxHistoryBytes {
				return out, badRequest(fmt.Sprintf("The earlier messages hold more than %d bytes of text (api.max_history_bytes). "+
					"Start a new conversation.", s.cfg.MaxHistoryBytes), param+".content")
			}
			if strings.TrimSpace(t) != "" {
				out.history = append(out.history, llm.Message{Role: llm.Role(m.Role), Parts: []llm.Part{llm.Text(t)}})
			}
		case "system", "developer", "tool", "function":
			// The assistant's own prompt rules and its tools run here.
		default:
			return out, badRequest(fmt.Sprintf("Invalid role %q.", m.Role), param+".role")
		}
	}
	session := r.Header.Get("X-Session-Id")
	if session == "" {
		session = req.User
	}
	if session != "" && !validSessionID(session) {
		return out, badRequest("A session id (X-Session-Id or user) is 1-128 characters A-Z a-z 0-9 . _ @ + -.", "user")
	}
	out.model, out.stream, out.session, out.text, out.images = req.Model, req.Stream, session, text, images
	out.includeUsage = req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	return out, nil
}

// whole waits for the answer and writes it as one JSON response.
func (s *Server) whole(w http.ResponseWriter, r *http.Request, c *call, req turnRequest) string {
	select {
	case <-c.done:
	case <-c.expired:
		select {
		case <-c.done: // both: the answer wins
		default:
			timedOut.write(w)
			return timedOut.outcome
		}
	case <-r.Context().Done():
		return "client_closed"
	}
	res := c.result()
	if aerr := endError(res); aerr != nil {
		aerr.write(w)
		return aerr.outcome
	}
	stop := finishReason(res.finish)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(completion{ID: c.id, Object: "chat.completion", Created: s.now().Unix(), Model: req.model,
		Usage: usageOf(res.usage),
		Choices: []wholeChoice{{Message: fullMessage{Role: "assistant", Content: res.content, ReasoningContent: res.reasoning},
			FinishReason: &stop}},
	})
	return "ok"
}

type wholeChoice struct {
	Index        int         `json:"index"`
	Message      fullMessage `json:"message"`
	FinishReason *string     `json:"finish_reason"`
}

// timedOut is the answer when turn_timeout passed first.
var timedOut = &apiError{status: http.StatusGatewayTimeout, typ: "server_error", code: "timeout", outcome: "timeout",
	message: "The answer took longer than this server waits (api.turn_timeout). The assistant goes on and saves it in the session."}

// endError is the error a call that did not end well answers with.
func endError(res result) *apiError {
	switch {
	case res.end == endShutdown:
		return unavailable
	case res.failed:
		// The agent's own words for the user: short, with no internal detail.
		return &apiError{status: http.StatusInternalServerError, typ: "server_error", message: res.failure, outcome: "failed"}
	case strings.TrimSpace(res.content) == "" && strings.TrimSpace(res.streamed) == "":
		// Never a silent 200 with nothing in it
		// (docs/reliability.md#every-turn-ends-with-something-to-read); the
		// agent always says something, so this is a bug or an answer made only
		// of files.
		return noAnswer
	}
	return nil
}

// noAnswer is the answer to a turn that ended with nothing to show.
var noAnswer = &apiError{status: http.StatusBadGateway, typ: "server_error", code: "empty_answer", outcome: "empty",
	message: "The assistant ended its turn without an answer. Please try again."}

// finishReason is the OpenAI finish_reason for how the model stopped
// (docs/reliability.md#every-turn-ends-with-something-to-read): "length" for a
// cut answer, "content_filter" for a refused or withheld one, otherwise "stop"
// (the turn's tools have already run).
func finishReason(s llm.StopReason) string {
	switch {
	case s == llm.StopLength:
		return "length"
	case s.Blocked():
		return "content_filter"
	}
	return "stop"
}

// stream writes the answer as server-sent events while it arrives.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, c *call, req turnRequest) string {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	created := s.now().Unix()
	event := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return err
		}
		return rc.Flush()
	}
	chunkOf := func(d *responseMessage, finish *string) completion {
		return completion{ID: c.id, Object: "chat.completion.chunk", Created: created, Model: req.model,
			Choices: []completionChoice{{Delta: d, FinishReason: finish}}}
	}
	if event(chunkOf(&responseMessage{Role: "assistant"}, nil)) != nil {
		return "client_closed"
	}
	keepAlive := time.NewTicker(s.keepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case <-c.notify:
		case <-c.done:
		case <-c.expired:
		case <-keepAlive.C:
			// A comment line: clients skip it, proxies see traffic.
			if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil || rc.Flush() != nil {
				return "client_closed"
			}
			continue
		case <-r.Context().Done():
			return "client_closed"
		}
		chunks, end := c.take()
		for _, ch := range chunks {
			d := &responseMessage{Content: ch.text}
			if ch.reasoning {
				d = &responseMessage{ReasoningContent: ch.text}
			}
			if event(chunkOf(d, nil)) != nil {
				return "client_closed"
			}
		}
		if end == endNone {
			select {
			case <-c.expired:
				_ = event(timedOut.body())
				return timedOut.outcome
			default:
			}
			continue
		}
		<-c.done // finish closes it right after the end is set
		res := c.result()
		if aerr := endError(res); aerr != nil {
			_ = event(aerr.body())
			return aerr.outcome
		}
		stop := finishReason(res.finish)
		if event(chunkOf(&responseMessage{}, &stop)) != nil {
			return "client_closed"
		}
		if req.includeUsage {
			u := completion{ID: c.id, Object: "chat.completion.chunk", Created: created, Model: req.model,
				Choices: []completionChoice{}, Usage: usageOf(res.usage)}
			if event(u) != nil {
				return "client_closed"
			}
		}
		if _, err := io.WriteString(w, "data: [DONE]\n\n"); err != nil {
			return "client_closed"
		}
		_ = rc.Flush()
		return "ok"
	}
}

// fail answers a request refused before it reached the agent.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, key string, start time.Time, e *apiError) {
	if e.status != 499 {
		e.write(w)
	}
	s.done(r, key, "", start, e.outcome, 0)
}

// done logs and counts a finished request. The token never appears; the
// key's name does.
func (s *Server) done(r *http.Request, key, session string, start time.Time, outcome string, chars int) {
	elapsed := s.now().Sub(start)
	s.obs.APIRequest(key, outcome, elapsed)
	fields := []zap.Field{zap.String("key", key), zap.String("outcome", outcome), zap.Duration("elapsed", elapsed),
		zap.String("path", r.URL.Path)}
	if session != "" {
		fields = append(fields, zap.String("session", session), zap.Int("chars", chars))
	}
	switch outcome {
	case "ok", "client_closed":
		s.log.Info("api request", fields...)
	default:
		s.log.Warn("api request refused or failed", fields...)
	}
}

// listModels serves GET /v1/models: the default and the configured routes.
func (s *Server) listModels(w http.ResponseWriter, r *http.Request, k *apiKey, start time.Time) {
	list := modelList{Object: "list", Data: []modelInfo{}}
	for _, m := range s.models {
		list.Data = append(list.Data, modelInfo{ID: m, Object: "model", OwnedBy: "nanobot"})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(list)
	s.done(r, k.name, "", start, "ok", 0)
}

// getModel serves GET /v1/models/{id}.
func (s *Server) getModel(w http.ResponseWriter, r *http.Request, k *apiKey, start time.Time) {
	id := r.PathValue("id")
	if !slices.Contains(s.models, id) {
		s.fail(w, r, k.name, start, &apiError{status: http.StatusNotFound, typ: "invalid_request_error", param: "model",
			code: "model_not_found", message: fmt.Sprintf("The model `%s` does not exist.", id), outcome: "not_found"})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(modelInfo{ID: id, Object: "model", OwnedBy: "nanobot"})
	s.done(r, k.name, "", start, "ok", 0)
}
