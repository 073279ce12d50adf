package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strings"

	goopenai "github.com/sashabaranov/go-openai"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
)

// ResponsesAPI is the wire-protocol name recorded in llm.Meta for the
// Responses adapter (providers.<name>.kind: openai-responses).
const ResponsesAPI = "openai-responses"

// Responses streams POST /responses through go-openai's CreateResponseStream.
// It shares the Chat Completions adapter's HTTP seam and error
// classification (the two APIs answer failures the same way), hence one
// package.
type Responses struct{ *Provider }

// NewResponses returns the Responses adapter for providers.<name>.
func NewResponses(name string, cfg config.ProviderConfig, httpClient *http.Client, log *zap.Logger) *Responses {
	return &Responses{New(name, cfg, httpClient, log)}
}

// reasoningSep joins a reasoning item's id and its encrypted content in a
// thinking part's Signature: replaying the item with store: false needs both,
// and the encrypted content is base64, which never holds the separator.
const reasoningSep = "|"

// Stream sends req to /responses and yields its deltas (provider.Streamer).
func (r *Responses) Stream(ctx context.Context, req llm.Request) iter.Seq[llm.Delta] {
	return func(yield func(llm.Delta) bool) {
		s := rstream{stream: stream{p: r.withLog(ctx), yield: yield}}
		s.run(ctx, req)
	}
}

// rstream is the state of one Responses call; like stream (whose emit and
// fail it reuses) it lives on the consumer's goroutine.
type rstream struct {
	stream
	status     string // the terminal event seen: response.completed or response.incomplete
	incomplete string // incomplete_details.reason
	sawCall    bool
	refused    bool              // a refusal came instead of output text
	open       map[string]string // item id -> call id of function calls being streamed
}

func (s *rstream) run(parent context.Context, req llm.Request) {
	p := s.p
	ctx, cancel, ok := s.begin(parent, ResponsesAPI, req.Model)
	if !ok {
		return
	}
	defer cancel()
	d := &doer{client: p.http, extra: p.cfg.ExtraHeaders}
	body := (&Responses{p}).responsesRequest(req)
	rs, err := p.client(d).CreateResponseStream(ctx, body)
	if err != nil {
		d.closeBody()
		s.fail(p.callError(parent, ctx, d, err))
		return
	}
	defer func() { _ = rs.Close() }()
	s.open = map[string]string{}
	for {
		ev, err := rs.Recv()
		switch {
		case errors.Is(err, io.EOF):
			s.finish(parent, ctx)
			return
		case err != nil:
			s.fail(p.callError(parent, ctx, d, err))
			return
		}
		if !s.handle(&ev) {
			return
		}
	}
}

// wireItem is an output item with the field go-openai's ResponseOutputItem
// lacks (encrypted_content), decoded from the event's raw JSON.
type wireItem struct {
	EncryptedContent string `json:"encrypted_content"`
}

func (s *rstream) handle(ev *goopenai.ResponseStreamEvent) bool {
	p := s.p
	switch ev.Type {
	case goopenai.ResponseStreamEventOutputTextDelta:
		return ev.Delta == "" || s.emit(llm.Delta{Kind: llm.DeltaText, Text: ev.Delta})
	case goopenai.ResponseStreamEventRefusalDelta:
		s.refused = true
		return ev.Delta == "" || s.emit(llm.Delta{Kind: llm.DeltaText, Text: ev.Delta})
	case goopenai.ResponseStreamEventOutputItemAdded:
		if it := ev.Item; it != nil && it.Type == "function_call" {
			s.open[it.ID] = it.CallID
			s.sawCall = true
			return s.emit(llm.Delta{Kind: llm.DeltaToolCallStart, CallID: it.CallID, Name: it.Name})
		}
	case goopenai.ResponseStreamEventFunctionArgumentsDelta:
		if id, ok := s.open[ev.ItemID]; ok && ev.Delta != "" {
			return s.emit(llm.Delta{Kind: llm.DeltaToolCallArgs, CallID: id, Args: ev.Delta})
		}
	case goopenai.ResponseStreamEventOutputItemDone:
		it := ev.Item
		if it == nil {
			return true
		}
		switch it.Type {
		case "function_call":
			id, ok := s.open[it.ID]
			if !ok {
				return true
			}
			delete(s.open, it.ID)
			return s.emit(llm.Delta{Kind: llm.DeltaToolCallEnd, CallID: id})
		case "reasoning":
			var raw struct {
				Item wireItem `json:"item"`
			}
			_ = json.Unmarshal(ev.Raw, &raw) // Raw already decoded once as the event
			var sum []string
			for _, part := range it.Summary {
				sum = append(sum, part.Text)
			}
			sig := ""
			if raw.Item.EncryptedContent != "" {
				sig = it.ID + reasoningSep + raw.Item.EncryptedContent
			}
			if sig == "" && len(sum) == 0 {
				return true
			}
			return s.emit(llm.Delta{Kind: llm.DeltaThinking, Text: strings.Join(sum, "\n"), Signature: sig})
		}
	case goopenai.ResponseStreamEventCompleted, goopenai.ResponseStreamEventIncomplete:
		s.status = string(ev.Type)
		if r := ev.Response; r != nil {
			if r.IncompleteDetails != nil {
				s.incomplete = r.IncompleteDetails.Reason
			}
			if u := r.Usage; u != nil {
				// input_tokens includes the cached part, as Chat's
				// prompt_tokens does; llm.Usage keeps them apart.
				use := llm.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens}
				if u.InputTokensDetails != nil {
					cached := min(u.InputTokensDetails.CachedTokens, u.InputTokens)
					use.CacheReadTokens, use.InputTokens = cached, u.InputTokens-cached
				}
				if u.OutputTokensDetails != nil {
					use.ReasoningTokens = u.OutputTokensDetails.ReasoningTokens
				}
				return s.emit(llm.Delta{Kind: llm.DeltaUsage, Usage: use})
			}
		}
	case goopenai.ResponseStreamEventFailed, goopenai.ResponseStreamEventError:
		e := &llm.APIError{Provider: p.name, Type: ev.Code, Message: p.scrub(ev.Message)}
		if ev.Response != nil && ev.Response.Error != nil {
			e.Type, e.Message = ev.Response.Error.Code, p.scrub(ev.Response.Error.Message)
		}
		if e.Type == "" {
			e.Type = "server_error"
		}
		e.Kind = vocabulary.Kind(0, e.Type, e.Message)
		s.fail(e)
		return false
	}
	return true
}

// finish ends the stream once the body is read: done after response.completed
// or response.incomplete, truncated otherwise.
func (s *rstream) finish(parent, ctx context.Context) {
	switch {
	case s.status != "":
	case parent.Err() != nil:
		s.fail(parent.Err())
		return
	case ctx.Err() != nil:
		s.fail(s.p.timeoutError(ctx.Err()))
		return
	default:
		s.fail(fmt.Errorf("%s: stream ended without response.completed: %w", s.p.name, llm.ErrTruncated))
		return
	}
	for _, id := range s.open { // a server that never closed a call
		if !s.emit(llm.Delta{Kind: llm.DeltaToolCallEnd, CallID: id}) {
			return
		}
	}
	s.emit(llm.Delta{Kind: llm.DeltaDone, StopReason: s.stopReason()})
}

// stopReason normalises how a Responses stream ended
// (docs/reliability.md#every-turn-ends-with-something-to-read):
// response.incomplete names its reason, response.completed does not.
func (s *rstream) stopReason() llm.StopReason {
	switch {
	case s.incomplete == "max_output_tokens":
		return llm.StopLength
	case s.incomplete == "content_filter":
		return llm.StopSafety
	case s.incomplete != "" || s.status == string(goopenai.ResponseStreamEventIncomplete):
		return llm.StopOther
	case s.refused:
		return llm.StopRefusal
	case s.sawCall:
		return llm.StopToolCalls
	}
	return llm.StopEnd
}
