package geminifake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// request is a generateContent body as the fake reads it: camelCase names
// only, and any unknown field is refused (Gemini answers "Invalid JSON
// payload received. Unknown name ...").
type request struct {
	Contents          []content `json:"contents"`
	SystemInstruction *content  `json:"systemInstruction"`
	Tools             []struct {
		FunctionDeclarations []struct {
			Name                 string          `json:"name"`
			Description          string          `json:"description"`
			Parameters           json.RawMessage `json:"parameters"`
			ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	ToolConfig *struct {
		FunctionCallingConfig struct {
			Mode                 string   `json:"mode"`
			AllowedFunctionNames []string `json:"allowedFunctionNames"`
		} `json:"functionCallingConfig"`
	} `json:"toolConfig"`
	GenerationConfig *struct {
		MaxOutputTokens int      `json:"maxOutputTokens"`
		Temperature     *float64 `json:"temperature"`
		ThinkingConfig  *struct {
			IncludeThoughts bool   `json:"includeThoughts"`
			ThinkingBudget  *int   `json:"thinkingBudget"`
			ThinkingLevel   string `json:"thinkingLevel"`
		} `json:"thinkingConfig"`
	} `json:"generationConfig"`

	model  string
	stream bool
}

type content struct {
	Role  string `json:"role"`
	Parts []part `json:"parts"`
}

type part struct {
	Text             *string `json:"text"`
	Thought          bool    `json:"thought"`
	ThoughtSignature *string `json:"thoughtSignature"`
	InlineData       *struct {
		MIMEType string `json:"mimeType"`
		Data     []byte `json:"data"`
	} `json:"inlineData"`
	FileData *struct {
		MIMEType string `json:"mimeType"`
		FileURI  string `json:"fileUri"`
	} `json:"fileData"`
	FunctionCall *struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
}

func parseRequest(raw []byte) (*request, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var r request
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("Invalid JSON payload received. %v", err)
	}
	return &r, nil
}

// data counts the data fields a part sets; Gemini wants exactly one.
func (p part) data() int {
	n := 0
	for _, set := range []bool{p.Text != nil, p.InlineData != nil, p.FileData != nil, p.FunctionCall != nil, p.FunctionResponse != nil} {
		if set {
			n++
		}
	}
	return n
}

// neutral is what the fake model understood of the request: model turns
// read as "assistant", and a user turn's function responses as its
// ToolResults (CallID is the response's id, or its name without one).
func (r *request) neutral() fakellm.Request {
	out := fakellm.Request{Model: r.model, Stream: r.stream}
	if g := r.GenerationConfig; g != nil {
		out.MaxTokens = g.MaxOutputTokens
		if t := g.ThinkingConfig; t != nil && t.ThinkingBudget != nil {
			out.ThinkingBudget = *t.ThinkingBudget
		}
	}
	if s := r.SystemInstruction; s != nil {
		var texts []string
		for _, p := range s.Parts {
			if p.Text != nil {
				texts = append(texts, *p.Text)
			}
		}
		out.System = strings.Join(texts, "\n")
	}
	for _, t := range r.Tools {
		for _, f := range t.FunctionDeclarations {
			out.Tools = append(out.Tools, f.Name)
		}
	}
	if tc := r.ToolConfig; tc != nil && tc.FunctionCallingConfig.Mode == "ANY" && len(tc.FunctionCallingConfig.AllowedFunctionNames) == 1 {
		out.ToolChoice = tc.FunctionCallingConfig.AllowedFunctionNames[0]
	}
	for _, c := range r.Contents {
		out.Messages = append(out.Messages, neutralMessage(c))
	}
	return out
}

func neutralMessage(c content) fakellm.Message {
	m := fakellm.Message{Role: c.Role}
	if c.Role == "model" {
		m.Role = "assistant"
	}
	var texts []string
	for _, p := range c.Parts {
		switch {
		case p.Text != nil && p.Thought:
			m.Thinking += *p.Text
		case p.Text != nil && *p.Text != "":
			texts = append(texts, *p.Text)
		case p.InlineData != nil, p.FileData != nil:
			m.Images++
		case p.FunctionCall != nil:
			m.ToolCalls = append(m.ToolCalls, fakellm.Call{ID: p.FunctionCall.ID, Name: p.FunctionCall.Name, Args: string(p.FunctionCall.Args)})
		case p.FunctionResponse != nil:
			fr := p.FunctionResponse
			var body map[string]any
			_ = json.Unmarshal(fr.Response, &body) // validated as an object before
			res := fakellm.Result{CallID: fr.ID, Content: fmt.Sprint(body["output"])}
			if res.CallID == "" {
				res.CallID = fr.Name
			}
			if e, ok := body["error"]; ok {
				res.Content, res.IsError = fmt.Sprint(e), true
			}
			m.ToolResults = append(m.ToolResults, res)
		}
	}
	m.Text = strings.Join(texts, "\n")
	return m
}
