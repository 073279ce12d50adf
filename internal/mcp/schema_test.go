package mcp

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/tools"
)

func TestNormalizeSchema(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"no schema", `null`, `{"properties":{},"type":"object"}`},
		{"object without properties", `{"type":"object"}`, `{"properties":{},"type":"object"}`},
		{"not an object schema", `{"type":"string"}`, `{"properties":{},"type":"object"}`},
		{"nullable object", `{"type":["object","null"],"properties":{"a":{"type":"string"}}}`,
			`{"properties":{"a":{"type":"string"}},"type":"object"}`},
		{"$schema dropped", `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"q":{"type":"string","$schema":"x"}}}`,
			`{"properties":{"q":{"type":"string"}},"type":"object"}`},
		{"root anyOf merged; only commonly required stays required",
			`{"anyOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},{"type":"object","properties":{"b":{"type":"integer"}},"required":["a","b"]}]}`,
			`{"properties":{"a":{"type":"string"},"b":{"type":"integer"}},"required":["a"],"type":"object"}`},
		{"root allOf merged with its required",
			`{"type":"object","properties":{"a":{"type":"string"}},"allOf":[{"properties":{"b":{"type":"string"}},"required":["b"]}],"required":["a"]}`,
			`{"properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a","b"],"type":"object"}`},
		{"root not/if/then dropped", `{"type":"object","properties":{},"not":{"required":["x"]},"if":{},"then":{}}`,
			`{"properties":{},"type":"object"}`},
		{"array without items", `{"type":"object","properties":{"tags":{"type":"array"}}}`,
			`{"properties":{"tags":{"items":{},"type":"array"}},"type":"object"}`},
		{"tuple items", `{"type":"object","properties":{"pt":{"type":"array","items":[{"type":"number"},{"type":"number"}]}}}`,
			`{"properties":{"pt":{"items":{},"type":"array"}},"type":"object"}`},
		{"nested object without properties", `{"type":"object","properties":{"meta":{"type":"object","additionalProperties":{"type":"string"}}}}`,
			`{"properties":{"meta":{"additionalProperties":{"type":"string"},"properties":{},"type":"object"}},"type":"object"}`},
		{"required names missing or repeated", `{"type":"object","properties":{"a":{}},"required":["a","a","ghost"]}`,
			`{"properties":{"a":{}},"required":["a"],"type":"object"}`},
		{"boolean subschemas", `{"type":"object","properties":{"any":true,"never":false},"required":["never"]}`,
			`{"properties":{"any":{}},"type":"object"}`},
		{"draft-04 exclusive bounds",
			`{"type":"object","properties":{"n":{"type":"number","minimum":0,"exclusiveMinimum":true,"maximum":9,"exclusiveMaximum":false}}}`,
			`{"properties":{"n":{"exclusiveMinimum":0,"maximum":9,"type":"number"}},"type":"object"}`},
		{"remote $ref", `{"type":"object","properties":{"x":{"$ref":"https://example.com/s.json","description":"an x"}}}`,
			`{"properties":{"x":{"description":"an x"}},"type":"object"}`},
		{"local $ref kept", `{"type":"object","properties":{"p":{"$ref":"#/$defs/pt"}},"$defs":{"pt":{"type":"object"}}}`,
			`{"$defs":{"pt":{"properties":{},"type":"object"}},"properties":{"p":{"$ref":"#/$defs/pt"}},"type":"object"}`},
		{"anyOf branches inside", `{"type":"object","properties":{"v":{"anyOf":[{"type":"array"},false]}}}`,
			`{"properties":{"v":{"anyOf":[{"items":{},"type":"array"},{"not":{}}]}},"type":"object"}`},
	}
	reg := tools.NewRegistry(tools.RegistryLimits(config.Defaults().Agents), zaptest.NewLogger(t))
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var in any
			if err := json.Unmarshal([]byte(tc.in), &in); err != nil {
				t.Fatal(err)
			}
			got, err := normalizeSchema(in)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			// Whatever comes out, the registry accepts as parameters.
			name := "t" + strings.Repeat("x", i)
			if err := reg.Register(stubTool{llm.ToolSpec{Name: name, Parameters: got}}); err != nil {
				t.Errorf("the registry refuses the result: %v", err)
			}
		})
	}
}

func TestClipDescription(t *testing.T) {
	long := strings.Repeat("é", 2000)
	got := clipDescription(long)
	if n := len([]rune(got)); n != maxDescription || !strings.HasSuffix(got, "…") {
		t.Errorf("clipped to %d runes ending %q, want %d ending with …", n, got[len(got)-3:], maxDescription)
	}
	if got := clipDescription("  short  "); got != "short" {
		t.Errorf("short description became %q", got)
	}
}

type stubTool struct{ spec llm.ToolSpec }

func (s stubTool) Spec() llm.ToolSpec { return s.spec }
func (stubTool) Run(context.Context, tools.Invocation) (tools.Result, error) {
	return tools.Result{}, nil
}
