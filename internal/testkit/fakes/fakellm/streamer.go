package fakellm

import (
	"context"
	"errors"
	"iter"
	"time"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// Streamer is an in-process model driven by the same Script as the HTTP
// fakes. It emits deltas directly (no wire protocol), for tests of the agent
// and router that are not about a provider's protocol. It implements
// provider.Streamer.
type Streamer struct {
	Name   string // provider name recorded in Meta [fake]
	Script *Script
}

// errorKinds is how the in-process model, standing in for an adapter,
// reads the error types scripts give it (the ones the HTTP fakes' protocols
// use), so that a scripted quota or too-long refusal is classified as an
// adapter would classify it; any other type leaves it to the status.
var errorKinds = map[string]llm.Kind{
	"insufficient_quota": llm.KindQuota, "billing_error": llm.KindQuota,
	"context_length_exceeded": llm.KindTooLong,
	"rate_limit_error":        llm.KindRateLimit, "rate_limit_exceeded": llm.KindRateLimit,
	"server_error": llm.KindUnavailable, "overloaded_error": llm.KindUnavailable,
	"authentication_error": llm.KindAuth, "invalid_request_error": llm.KindRejected,
}

// Stream turns the next scripted Reply into deltas.
func (s *Streamer) Stream(ctx context.Context, req llm.Request) iter.Seq[llm.Delta] {
	return func(yield func(llm.Delta) bool) {
		r := s.Script.Next(neutral(req))
		seq := 0
		emit := func(d llm.Delta) bool {
			seq++
			d.Seq = seq
			return yield(d)
		}
		name := s.Name
		if name == "" {
			name = "fake"
		}
		if r.Delay > 0 {
			t := time.NewTimer(r.Delay)
			select {
			case <-ctx.Done():
				t.Stop()
				emit(llm.Delta{Kind: llm.DeltaStart, Meta: &llm.Meta{Provider: name, API: "fake", Model: req.Model}})
				emit(llm.Delta{Kind: llm.DeltaError, Err: ctx.Err()})
				return
			case <-t.C:
			}
		}
		if !emit(llm.Delta{Kind: llm.DeltaStart, Meta: &llm.Meta{Provider: name, API: "fake", Model: req.Model}}) {
			return
		}
		if r.Status != 0 {
			emit(llm.Delta{Kind: llm.DeltaError, Err: &llm.APIError{Provider: name, Status: r.Status, Type: r.ErrorType, Message: r.ErrorMessage,
				RetryAfter: parseRetryAfter(r.RetryAfter), Kind: errorKinds[r.ErrorType]}})
			return
		}
		if r.Thinking != "" {
			sig := r.Signature
			if sig == "" {
				sig = "sig-" + name
			}
			if !emit(llm.Delta{Kind: llm.DeltaThinking, Text: r.Thinking}) || !emit(llm.Delta{Kind: llm.DeltaThinking, Signature: sig}) {
				return
			}
		}
		chunk := r.Chunk
		if chunk <= 0 {
			chunk = 8
		}
		for text := r.Text; text != ""; {
			n := min(chunk, len(text))
			if !emit(llm.Delta{Kind: llm.DeltaText, Text: text[:n]}) {
				return
			}
			text = text[n:]
			if r.ChunkDelay > 0 {
				select {
				case <-ctx.Done():
					emit(llm.Delta{Kind: llm.DeltaError, Err: ctx.Err()})
					return
				case <-time.After(r.ChunkDelay):
				}
			}
			if err := ctx.Err(); err != nil {
				emit(llm.Delta{Kind: llm.DeltaError, Err: err})
				return
			}
		}
		for _, c := range r.ToolCalls {
			if !emit(llm.Delta{Kind: llm.DeltaToolCallStart, CallID: c.ID, Name: c.Name}) ||
				!emit(llm.Delta{Kind: llm.DeltaToolCallArgs, CallID: c.ID, Args: c.Args}) ||
				!emit(llm.Delta{Kind: llm.DeltaToolCallEnd, CallID: c.ID}) {
				return
			}
		}
		switch {
		case r.MidStreamError != "":
			emit(llm.Delta{Kind: llm.DeltaError, Err: &llm.APIError{Provider: name, Type: "server_error", Message: r.MidStreamError}})
			return
		case r.Truncate:
			emit(llm.Delta{Kind: llm.DeltaError, Err: llm.ErrTruncated})
			return
		case r.Garbage:
			emit(llm.Delta{Kind: llm.DeltaError, Err: &llm.APIError{Provider: name, Message: "invalid JSON in stream", Err: errors.New("garbage chunk")}})
			return
		}
		in, out := r.InputTokens, r.OutputTokens
		if in == 0 {
			in = 10 * (len(req.Messages) + 1)
		}
		if out == 0 {
			out = (len(r.Text) + 3) / 4
		}
		if !emit(llm.Delta{Kind: llm.DeltaUsage, Usage: llm.Usage{InputTokens: in, OutputTokens: out}}) {
			return
		}
		emit(llm.Delta{Kind: llm.DeltaDone, StopReason: r.StopReason()})
	}
}

func parseRetryAfter(s string) time.Duration {
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(s + "s")
	if err != nil {
		return 0
	}
	return d
}

// neutral converts an llm.Request to the Script's provider-neutral record.
func neutral(req llm.Request) Request {
	out := Request{Model: req.Model, System: req.System, ToolChoice: req.ForceTool, MaxTokens: req.MaxTokens, Stream: true}
	for _, t := range req.Tools {
		out.Tools = append(out.Tools, t.Name)
	}
	for _, m := range req.Messages {
		nm := Message{Role: string(m.Role), Text: m.Text()}
		for _, p := range m.Parts {
			switch p.Kind {
			case llm.PartImage:
				nm.Images++
			case llm.PartToolCall:
				args := string(p.Call.Arguments)
				if p.Call.ParseError != "" {
					args = p.Call.RawArgs
				}
				nm.ToolCalls = append(nm.ToolCalls, Call{ID: p.Call.ID, Name: p.Call.Name, Args: args})
			case llm.PartToolResult:
				nm.ToolResults = append(nm.ToolResults, Result{CallID: p.Result.ToolCallID, Content: p.Result.Content.Live, IsError: p.Result.IsError})
			}
		}
		out.Messages = append(out.Messages, nm)
	}
	return out
}
