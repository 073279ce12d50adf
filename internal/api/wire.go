package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nanobot-go/nanobot/internal/inbox"
	"github.com/nanobot-go/nanobot/internal/llm"
)

// The OpenAI wire format: what a chat completion request may hold, and the
// shapes of answers and errors. Only what nanobot uses is interpreted; the
// other documented request fields are accepted and ignored (the agent's own
// configuration decides sampling, and tools stay on the server), and a
// field OpenAI does not document is refused, as OpenAI does.

type chatRequest struct {
	Model         string         `json:"model"`
	Messages      []chatMessage  `json:"messages"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options"`
	User          string         `json:"user"`
	N             *int           `json:"n"`

	// Accepted and ignored.
	Temperature         json.RawMessage `json:"temperature"`
	TopP                json.RawMessage `json:"top_p"`
	MaxTokens           json.RawMessage `json:"max_tokens"`
	MaxCompletionTokens json.RawMessage `json:"max_completion_tokens"`
	Stop                json.RawMessage `json:"stop"`
	PresencePenalty     json.RawMessage `json:"presence_penalty"`
	FrequencyPenalty    json.RawMessage `json:"frequency_penalty"`
	LogitBias           json.RawMessage `json:"logit_bias"`
	Logprobs            json.RawMessage `json:"logprobs"`
	TopLogprobs         json.RawMessage `json:"top_logprobs"`
	Seed                json.RawMessage `json:"seed"`
	Tools               json.RawMessage `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	ParallelToolCalls   json.RawMessage `json:"parallel_tool_calls"`
	Functions           json.RawMessage `json:"functions"`
	FunctionCall        json.RawMessage `json:"function_call"`
	ResponseFormat      json.RawMessage `json:"response_format"`
	Metadata            json.RawMessage `json:"metadata"`
	Store               json.RawMessage `json:"store"`
	ReasoningEffort     json.RawMessage `json:"reasoning_effort"`
	ServiceTier         json.RawMessage `json:"service_tier"`
	Modalities          json.RawMessage `json:"modalities"`
	Audio               json.RawMessage `json:"audio"`
	Prediction          json.RawMessage `json:"prediction"`
	WebSearchOptions    json.RawMessage `json:"web_search_options"`
	Verbosity           json.RawMessage `json:"verbosity"`
	PromptCacheKey      json.RawMessage `json:"prompt_cache_key"`
	SafetyIdentifier    json.RawMessage `json:"safety_identifier"`
	ChatTemplateKwargs  json.RawMessage `json:"chat_template_kwargs"`
	GuidedChoice        json.RawMessage `json:"guided_choice"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	Name             string          `json:"name"`
	ToolCalls        json.RawMessage `json:"tool_calls"`
	ToolCallID       string          `json:"tool_call_id"`
	FunctionCall     json.RawMessage `json:"function_call"`
	Refusal          json.RawMessage `json:"refusal"`
	ReasoningContent json.RawMessage `json:"reasoning_content"`
	Audio            json.RawMessage `json:"audio"`
}

type contentPart struct {
	Type     string    `json:"type"`
	Text     string    `json:"text"`
	ImageURL *imageURL `json:"image_url"`
}

type imageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail"`
}

// decodeRequest parses body strictly: one JSON object, no unknown field.
func decodeRequest(body []byte) (chatRequest, *apiError) {
	var req chatRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			name, _ = strconv.Unquote(name)
			return req, badRequest("Unrecognized request argument supplied: "+name, name)
		}
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field == "" {
			return req, badRequest("We could not parse the JSON body of your request: it must be a JSON object.", "")
		}
		if errors.As(err, &typeErr) {
			return req, badRequest(fmt.Sprintf("Invalid type for '%s': a JSON %s is not valid there.", typeErr.Field, typeErr.Value), typeErr.Field)
		}
		return req, badRequest("We could not parse the JSON body of your request: "+err.Error()+
			". (Send a JSON object; see the OpenAI chat completions reference.)", "")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return req, badRequest("We could not parse the JSON body of your request: data after the JSON object.", "")
	}
	return req, nil
}

// contentOf reads a message's content: a string, null, or an array of parts
// (text joined with blank lines; data: URL images returned apart).
func contentOf(raw json.RawMessage, param string) (string, []llm.Part, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", nil, badRequest("Invalid content: "+err.Error(), param)
		}
		return s, nil, nil
	}
	var parts []contentPart
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&parts); err != nil {
		return "", nil, badRequest("Invalid content: a string or an array of content parts is expected ("+err.Error()+").", param)
	}
	var texts []string
	var images []llm.Part
	for i, p := range parts {
		switch p.Type {
		case "text":
			texts = append(texts, p.Text)
		case "image_url":
			img, err := dataImage(p.ImageURL)
			if err != nil {
				return "", nil, badRequest(err.Error(), fmt.Sprintf("%s[%d].image_url", param, i))
			}
			images = append(images, llm.Part{Kind: llm.PartImage, Image: img})
		default:
			return "", nil, badRequest(fmt.Sprintf("Content part type %q is not supported (text and image_url are).", p.Type),
				fmt.Sprintf("%s[%d].type", param, i))
		}
	}
	return strings.Join(texts, "\n\n"), images, nil
}

// dataImage decodes an image given inline as a data: URL. Remote URLs are
// refused: the server would have to fetch what a client chose. The type the
// URL declares is not believed: the bytes must be a PNG, JPEG, GIF or WebP
// picture, and the image carries the type they are (which later names the
// file's extension; the client's words never reach a file name).
func dataImage(u *imageURL) (*llm.Image, error) {
	if u == nil {
		return nil, errors.New("image_url is missing")
	}
	rest, ok := strings.CutPrefix(u.URL, "data:")
	if !ok {
		return nil, errors.New("only inline images (data:image/...;base64,...) are supported, not links")
	}
	meta, data, ok := strings.Cut(rest, ",")
	if !ok || !strings.HasSuffix(meta, ";base64") {
		return nil, errors.New("an inline image must be data:image/<type>;base64,<data>")
	}
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil || len(b) == 0 {
		return nil, errors.New("the inline image's base64 data is invalid")
	}
	mime, err := inbox.SniffImage(b)
	if err != nil {
		return nil, errors.New("the inline image is not a PNG, JPEG, GIF or WebP picture (its bytes were checked; the declared type is not used)")
	}
	return &llm.Image{MIME: mime, Data: b}, nil
}

// Answers.

type completion struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices any    `json:"choices"` // []completionChoice, or []wholeChoice
	Usage   *usage `json:"usage,omitempty"`
}

type completionChoice struct {
	Index        int              `json:"index"`
	Delta        *responseMessage `json:"delta"`
	FinishReason *string          `json:"finish_reason"`
}

type responseMessage struct {
	Role             string `json:"role,omitempty"`
	Content          string `json:"content,omitempty"`
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

// fullMessage is a non-streamed answer's message: content always present.
type fullMessage struct {
	Role             string `json:"role"`
	Content          string `json:"content"`
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func usageOf(u llm.Usage) *usage {
	in := u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens
	return &usage{PromptTokens: in, CompletionTokens: u.OutputTokens, TotalTokens: in + u.OutputTokens}
}

type modelList struct {
	Object string      `json:"object"`
	Data   []modelInfo `json:"data"`
}

type modelInfo struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// Errors, in OpenAI's shape: {"error":{"message","type","param","code"}}.

type apiError struct {
	status     int
	message    string
	typ        string
	param      string
	code       string
	retryAfter time.Duration
	// outcome labels the request in logs and metrics.
	outcome string
}

func (e *apiError) write(w http.ResponseWriter) {
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((e.retryAfter+time.Second-1)/time.Second)))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(e.body())
}

func (e *apiError) body() map[string]any {
	return map[string]any{"error": map[string]any{
		"message": e.message, "type": e.typ, "param": nullable(e.param), "code": nullable(e.code),
	}}
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func badRequest(msg, param string) *apiError {
	return &apiError{status: http.StatusBadRequest, message: msg, typ: "invalid_request_error", param: param, outcome: "bad_request"}
}
