package llm

import (
	"errors"
	"testing"
)

func TestCheckAnswer(t *testing.T) {
	call := Part{Kind: PartToolCall, Call: &ToolCall{ID: "c", Name: "f", Arguments: []byte("{}")}}
	thinking := Part{Kind: PartThinking, Text: "hmm"}
	msg := func(stop StopReason, parts ...Part) Message {
		return Message{Role: RoleAssistant, Parts: parts, Meta: &Meta{StopReason: stop}}
	}
	tests := []struct {
		name   string
		msg    Message
		usable bool
	}{
		{"text", msg(StopEnd, Text("hi")), true},
		{"call", msg(StopToolCalls, call), true},
		{"nothing", msg(StopEnd), false},
		{"only thinking", msg(StopEnd, thinking), false},
		{"empty text part", msg(StopEnd, Text("")), false},
		{"other reason, nothing", msg(StopOther), false},
		{"no stop recorded, nothing", Message{Role: RoleAssistant}, false},
		{"malformed call", msg(StopMalformedCall), false},
		{"malformed call after text", msg(StopMalformedCall, Text("let me")), false},
		{"cut with only thinking", msg(StopLength, thinking), true},
		{"cut text", msg(StopLength, Text("half")), true},
		{"refused, nothing", msg(StopRefusal), true},
		{"safety, nothing", msg(StopSafety), true},
		{"recitation, nothing", msg(StopRecitation), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckAnswer(tt.msg)
			var ae *AnswerError
			if tt.usable != (err == nil) || (err != nil && !errors.As(err, &ae)) {
				t.Errorf("CheckAnswer = %v, want usable %v", err, tt.usable)
			}
		})
	}
}

func TestValidateRefusesAssistantWithoutParts(t *testing.T) {
	for _, m := range []Message{
		{Role: RoleAssistant},
		{Role: RoleAssistant, Parts: []Part{}, Meta: &Meta{StopReason: StopEnd}},
	} {
		if err := m.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", m)
		}
	}
	if err := (Message{Role: RoleAssistant, Parts: []Part{{Kind: PartThinking, Text: "x"}}}).Validate(); err != nil {
		t.Errorf("assistant with thinking only refused: %v", err)
	}
}
