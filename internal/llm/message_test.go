package llm

import (
	"reflect"
	"testing"
)

// TestToolCallsAndResults covers partsOf through its two users: the parts
// of the asked kind, in order, with empty ones skipped.
func TestToolCallsAndResults(t *testing.T) {
	c1, c2 := ToolCall{ID: "1", Name: "a"}, ToolCall{ID: "2", Name: "b"}
	r1, r2 := ToolResult{ToolCallID: "1", Name: "a"}, ToolResult{ToolCallID: "2", Name: "b"}
	tests := []struct {
		name    string
		parts   []Part
		calls   []ToolCall
		results []ToolResult
	}{
		{"none", nil, nil, nil},
		{"text only", []Part{Text("hi")}, nil, nil},
		{"calls in order", []Part{{Kind: PartToolCall, Call: &c1}, Text("x"), {Kind: PartToolCall, Call: &c2}},
			[]ToolCall{c1, c2}, nil},
		{"results in order", []Part{{Kind: PartToolResult, Result: &r2}, {Kind: PartToolResult, Result: &r1}},
			nil, []ToolResult{r2, r1}},
		{"empty parts skipped", []Part{{Kind: PartToolCall}, {Kind: PartToolResult}, {Kind: PartToolCall, Call: &c1}},
			[]ToolCall{c1}, nil},
		{"kind decides, not the field", []Part{{Kind: PartText, Call: &c1, Result: &r1}}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := Message{Role: RoleAssistant, Parts: tt.parts}
			if got := m.ToolCalls(); !reflect.DeepEqual(got, tt.calls) {
				t.Errorf("ToolCalls() = %v, want %v", got, tt.calls)
			}
			if got := m.ToolResults(); !reflect.DeepEqual(got, tt.results) {
				t.Errorf("ToolResults() = %v, want %v", got, tt.results)
			}
		})
	}
}
