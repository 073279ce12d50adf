package llm

import "fmt"

// StopReason is why a model stopped writing, normalised across the wire
// protocols (docs/reliability.md#every-turn-ends-with-something-to-read). Each
// adapter maps its own vocabulary onto these values (its stop function says
// which of its words is which); the agent decides once what each means for
// the user.
type StopReason string

const (
	// StopEnd: the model finished its answer.
	StopEnd StopReason = "stop"
	// StopToolCalls: the model stopped to have tools run.
	StopToolCalls StopReason = "tool_calls"
	// StopLength: the answer was cut at the output token limit.
	StopLength StopReason = "length"
	// StopRefusal: the model declined (a refusal stop or message).
	StopRefusal StopReason = "refusal"
	// StopSafety: a safety filter stopped or withheld the answer.
	StopSafety StopReason = "safety"
	// StopRecitation: the answer was withheld for reciting protected text.
	StopRecitation StopReason = "recitation"
	// StopMalformedCall: the model produced a tool call the provider could
	// not parse.
	StopMalformedCall StopReason = "malformed_call"
	// StopOther: any other reason the provider named.
	StopOther StopReason = "other"
)

// Blocked reports a stop that withheld the answer on purpose: a refusal, a
// safety filter or recitation. Asking again rarely helps; the user is told.
func (s StopReason) Blocked() bool {
	return s == StopRefusal || s == StopSafety || s == StopRecitation
}

// Stop is the message's normalised stop reason ("" when none was recorded,
// e.g. for a message the program wrote).
func (m Message) Stop() StopReason {
	if m.Meta == nil {
		return ""
	}
	return m.Meta.StopReason
}

// Empty reports a message with neither text nor a tool call (it may hold
// thinking): nothing to show and nothing to do.
func (m Message) Empty() bool {
	for _, p := range m.Parts {
		switch {
		case p.Kind == PartToolCall:
			return false
		case p.Kind == PartText && p.Text != "":
			return false
		}
	}
	return true
}

// AnswerError is an answer that arrived whole but cannot be used: it is
// empty (no text, no tool call) although the model claims to have finished,
// or its tool call was malformed. Asking again, or another route, may give a
// usable one; the router retries it once and then falls back.
type AnswerError struct {
	Stop StopReason
}

func (e *AnswerError) Error() string {
	if e.Stop == StopMalformedCall {
		return "the model produced a malformed tool call"
	}
	return fmt.Sprintf("the model answered with nothing (stop reason %q)", e.Stop)
}

// Check is CheckAnswer for an answer to r: with EmptyOK, an empty answer
// is taken as it is (a malformed call still is not).
func (r Request) Check(m Message) error {
	if r.EmptyOK && m.Empty() && m.Stop() != StopMalformedCall {
		return nil
	}
	return CheckAnswer(m)
}

// CheckAnswer returns an *AnswerError for an answer that is not to be taken
// as it is: a malformed tool call, or an empty answer stopped for an
// ordinary reason. An empty answer cut at the length limit or withheld by a
// refusal or filter is returned as it is (nil): the stop reason says what
// happened and the agent tells the user.
func CheckAnswer(m Message) error {
	stop := m.Stop()
	switch {
	case stop == StopMalformedCall:
		return &AnswerError{Stop: stop}
	case !m.Empty(), stop == StopLength, stop.Blocked():
		return nil
	}
	return &AnswerError{Stop: stop}
}
