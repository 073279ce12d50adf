package geminifake

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// post sends body to the stream endpoint with key and returns the status and
// the body read whole.
func post(t *testing.T, s *Server, key, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL()+"/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("x-goog-api-key", key)
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

const (
	user    = `{"role":"user","parts":[{"text":"hi"}]}`
	callA   = `{"role":"model","parts":[{"functionCall":{"name":"a","args":{}},"thoughtSignature":"context_engineering_is_the_way_to_go"}]}`
	answerA = `{"role":"user","parts":[{"functionResponse":{"name":"a","response":{"output":"x"}}}]}`
)

func contents(cs ...string) string { return `{"contents":[` + strings.Join(cs, ",") + `]}` }

func TestRefusesWhatGeminiRefuses(t *testing.T) {
	bypass := `{"role":"model","parts":[{"functionCall":{"name":"a","args":{}},"thoughtSignature":"skip_thought_signature_validator"}]}`
	unsigned := `{"role":"model","parts":[{"functionCall":{"name":"a","args":{}}}]}`
	tests := []struct {
		name   string
		key    string
		body   string
		status int
		says   string
	}{
		{"no key", "-", contents(user), 403, "unregistered callers"},
		{"wrong key", "AIzaWrong", contents(user), 400, "API_KEY_INVALID"},
		{"unknown field", "", `{"contents":[` + user + `],"temperature":1}`, 400, "Invalid JSON payload"},
		{"snake_case is not what we send", "", `{"contents":[` + user + `],"system_instruction":{"parts":[{"text":"x"}]}}`, 400, "Invalid JSON payload"},
		{"empty contents", "", contents(), 400, "contents is not specified"},
		{"bad role", "", contents(`{"role":"assistant","parts":[{"text":"x"}]}`), 400, "valid role"},
		{"part with two data fields", "", contents(`{"role":"user","parts":[{"text":"x","inlineData":{"mimeType":"image/png","data":"AAAA"}}]}`), 400, "oneof field 'data'"},
		{"consecutive user turns", "", contents(user, user), 400, "alternate between user and model"},
		{"response without its call", "", contents(user, `{"role":"model","parts":[{"text":"ok"}]}`, answerA), 400, "function response turn comes immediately after a function call turn"},
		{"call not answered", "", contents(user, bypass, user), 400, "function response turn comes immediately after"},
		{"response count", "", contents(user, bypass, `{"role":"user","parts":[`+strings.Repeat(`{"functionResponse":{"name":"a","response":{}}},`, 2)+`{"text":"x"}]}`), 400, "number of function response parts"},
		{"response for another function", "", contents(user, bypass, `{"role":"user","parts":[{"functionResponse":{"name":"b","response":{}}}]}`), 400, "does not match function call"},
		{"response not an object", "", contents(user, bypass, `{"role":"user","parts":[{"functionResponse":{"name":"a","response":"x"}}]}`), 400, "google.protobuf.Struct"},
		{"call after a model turn", "", contents(user, `{"role":"model","parts":[{"text":"x"}]}`, bypass), 400, "alternate"},
		{"unsigned call in the current turn", "", contents(user, unsigned, answerA), 400, "missing a `thought_signature`"},
		{"signature not base64", "", contents(user, `{"role":"model","parts":[{"text":"x","thoughtSignature":"not base64!"}]}`, user), 400, "Base64 decoding failed"},
		{"signature from elsewhere", "", contents(user, `{"role":"model","parts":[{"text":"x","thoughtSignature":"ZmFrZXNpZy0xMjM0"}]}`, user), 400, "Thought signature is not valid"},
		{"bad function name", "", `{"contents":[` + user + `],"tools":[{"functionDeclarations":[{"name":"1bad"}]}]}`, 400, "Invalid function name"},
		{"forced tool not declared", "", `{"contents":[` + user + `],"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["x"]}}}`, 400, "not declared"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(t, nil)
			key := APIKey
			switch tt.key {
			case "-":
				key = ""
			case "":
			default:
				key = tt.key
			}
			status, body := post(t, s, key, tt.body)
			if status != tt.status || !strings.Contains(body, tt.says) {
				t.Errorf("got %d %s, want %d saying %q", status, body, tt.status, tt.says)
			}
			if len(s.Rejected()) != 1 || len(s.Script().Requests()) != 0 {
				t.Errorf("rejected %d, scripted %d", len(s.Rejected()), len(s.Script().Requests()))
			}
		})
	}
}

func TestAcceptsAToolLoopAndUnsignedCallsOfEarlierTurns(t *testing.T) {
	s := New(t, nil)
	unsigned := `{"role":"model","parts":[{"functionCall":{"name":"a","args":{}}}]}`
	answered := `{"role":"model","parts":[{"text":"done"}]}`
	next := `{"role":"user","parts":[{"text":"again"}]}`
	mixed := `{"role":"user","parts":[{"functionResponse":{"name":"a","response":{"output":"x"}}},{"text":"and this"}]}`
	for _, body := range []string{
		contents(user, callA, answerA),
		contents(user, unsigned, answerA, answered, next),
		contents(user, callA, mixed),
	} {
		if status, resp := post(t, s, APIKey, body); status != 200 {
			t.Errorf("%s: %d %s", body, status, resp)
		}
	}
}

// The stream signs only the first call, puts a reply's signature without
// calls on an empty text part, and reports running usage.
func TestStreamShape(t *testing.T) {
	script := &fakellm.Script{}
	s := New(t, script)
	script.Push(
		fakellm.Reply{Thinking: "hmm", ToolCalls: []fakellm.Call{{Name: "a", Args: `{}`}, {Name: "b", Args: `{"x":1}`}}},
		fakellm.Reply{Thinking: "hmm", Text: "ok", Truncate: true},
	)
	status, body := post(t, s, APIKey, contents(user))
	if status != 200 {
		t.Fatal(status, body)
	}
	var sigs []bool
	var finish string
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var c struct {
			Candidates []struct {
				Content struct {
					Parts []map[string]any `json:"parts"`
				} `json:"content"`
				FinishReason string `json:"finishReason"`
			} `json:"candidates"`
		}
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("chunk %s: %v", line, err)
		}
		for _, p := range c.Candidates[0].Content.Parts {
			if _, ok := p["functionCall"]; ok {
				_, signed := p["thoughtSignature"]
				sigs = append(sigs, signed)
			}
		}
		finish = c.Candidates[0].FinishReason
	}
	if len(sigs) != 2 || !sigs[0] || sigs[1] || finish != "STOP" {
		t.Errorf("signed %v finish %q", sigs, finish)
	}
	_, body = post(t, s, APIKey, contents(user))
	if strings.Contains(body, "finishReason") || !strings.Contains(body, `"text":""`) {
		t.Errorf("truncated stream: %s", body)
	}
}
