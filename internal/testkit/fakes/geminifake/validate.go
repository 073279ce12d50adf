package geminifake

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
)

// The rules below are ones the Gemini API enforces on generateContent and
// that a provider-neutral history most easily breaks. Messages follow the
// API's own wording where it is known, so a failing test reads like the
// real refusal.

var functionNameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$`)

// bypassSignatures are the values Google documents for a function call
// whose signature was lost or that another model made.
var bypassSignatures = map[string]bool{
	"skip_thought_signature_validator":     true,
	"context_engineering_is_the_way_to_go": true,
}

var toolModes = map[string]bool{"AUTO": true, "ANY": true, "NONE": true, "VALIDATED": true}

func (s *Server) validate(r *request) error {
	checks := []func(*request) error{validateTools, validateSystem, validateContents, validateTurns, s.validateSignatures}
	for _, check := range checks {
		if err := check(r); err != nil {
			return err
		}
	}
	return nil
}

func validateTools(r *request) error {
	names := map[string]bool{}
	for i, t := range r.Tools {
		for j, f := range t.FunctionDeclarations {
			path := fmt.Sprintf("tools[%d].function_declarations[%d]", i, j)
			switch {
			case !functionNameRE.MatchString(f.Name):
				return fmt.Errorf("* GenerateContentRequest.%s.name: Invalid function name. Must start with a letter or an underscore. Must be alphameric (a-z, A-Z, 0-9), underscores (_), dots (.), colons (:), or dashes (-), with a maximum length of 64.", path)
			case names[f.Name]:
				return fmt.Errorf("* GenerateContentRequest.%s.name: Duplicate function declaration name %q", path, f.Name)
			case len(f.Parameters) > 0 && len(f.ParametersJSONSchema) > 0:
				return fmt.Errorf("* GenerateContentRequest.%s: parameters and parameters_json_schema are mutually exclusive", path)
			}
			if len(f.ParametersJSONSchema) > 0 {
				var obj map[string]any
				if json.Unmarshal(f.ParametersJSONSchema, &obj) != nil {
					return fmt.Errorf("* GenerateContentRequest.%s.parameters_json_schema: must be a JSON object", path)
				}
			}
			names[f.Name] = true
		}
	}
	tc := r.ToolConfig
	if tc == nil {
		return nil
	}
	fc := tc.FunctionCallingConfig
	if !toolModes[fc.Mode] {
		return fmt.Errorf("Invalid value at 'tool_config.function_calling_config.mode', %q", fc.Mode)
	}
	if len(fc.AllowedFunctionNames) > 0 && fc.Mode != "ANY" && fc.Mode != "VALIDATED" {
		return fmt.Errorf("* GenerateContentRequest.tool_config.function_calling_config.allowed_function_names: only allowed when mode is ANY or VALIDATED")
	}
	for _, n := range fc.AllowedFunctionNames {
		if !names[n] {
			return fmt.Errorf("* GenerateContentRequest.tool_config.function_calling_config.allowed_function_names: function %q is not declared", n)
		}
	}
	return nil
}

func validateSystem(r *request) error {
	if r.SystemInstruction == nil {
		return nil
	}
	for i, p := range r.SystemInstruction.Parts {
		if p.Text == nil || p.data() != 1 {
			return fmt.Errorf("* GenerateContentRequest.system_instruction.parts[%d]: only text parts are supported", i)
		}
	}
	return nil
}

func validateContents(r *request) error {
	if len(r.Contents) == 0 {
		return fmt.Errorf("* GenerateContentRequest.contents: contents is not specified")
	}
	for i, c := range r.Contents {
		path := fmt.Sprintf("contents[%d]", i)
		if c.Role != "user" && c.Role != "model" {
			return fmt.Errorf("Please use a valid role: user, model. (%s.role %q)", path, c.Role)
		}
		if len(c.Parts) == 0 {
			return fmt.Errorf("* GenerateContentRequest.%s.parts: contents.parts must not be empty.", path)
		}
		for j, p := range c.Parts {
			ppath := fmt.Sprintf("%s.parts[%d]", path, j)
			if p.data() != 1 {
				return fmt.Errorf("* GenerateContentRequest.%s.data: required oneof field 'data' must have one initialized field", ppath)
			}
			if err := validatePart(c.Role, p, ppath); err != nil {
				return err
			}
		}
	}
	return nil
}

func validatePart(role string, p part, path string) error {
	switch {
	case p.FunctionCall != nil && role != "model":
		return fmt.Errorf("* GenerateContentRequest.%s: function_call is only allowed in a model turn", path)
	case p.FunctionResponse != nil && role != "user":
		return fmt.Errorf("* GenerateContentRequest.%s: function_response is only allowed in a user turn", path)
	case p.Thought && role != "model":
		return fmt.Errorf("* GenerateContentRequest.%s: thought parts are only allowed in a model turn", path)
	case p.InlineData != nil && p.InlineData.MIMEType == "":
		return fmt.Errorf("* GenerateContentRequest.%s.inline_data.mime_type: Required field is not set", path)
	case p.InlineData != nil && len(p.InlineData.Data) == 0:
		return fmt.Errorf("* GenerateContentRequest.%s.inline_data.data: Required field is not set", path)
	}
	if fc := p.FunctionCall; fc != nil {
		if fc.Name == "" {
			return fmt.Errorf("* GenerateContentRequest.%s.function_call.name: Name cannot be empty.", path)
		}
		if len(fc.Args) > 0 && !isObject(fc.Args) {
			return fmt.Errorf("Invalid value at '%s.function_call.args' (type.googleapis.com/google.protobuf.Struct)", path)
		}
	}
	if fr := p.FunctionResponse; fr != nil {
		if fr.Name == "" {
			return fmt.Errorf("* GenerateContentRequest.%s.function_response.name: Name cannot be empty.", path)
		}
		if !isObject(fr.Response) {
			return fmt.Errorf("Invalid value at '%s.function_response.response' (type.googleapis.com/google.protobuf.Struct)", path)
		}
	}
	if sig := p.ThoughtSignature; sig != nil && !isBase64(*sig) {
		return fmt.Errorf("Invalid value at '%s.thought_signature' (TYPE_BYTES), Base64 decoding failed for %q", path, *sig)
	}
	return nil
}

// validateTurns checks the order of turns around function calling.
func validateTurns(r *request) error {
	for i, c := range r.Contents {
		if i > 0 && r.Contents[i-1].Role == c.Role {
			return fmt.Errorf("Please ensure that multiturn requests alternate between user and model. (contents[%d] and contents[%d] are both %s)", i-1, i, c.Role)
		}
		calls := countCalls(c)
		responses := countResponses(c)
		if calls > 0 && i > 0 && r.Contents[i-1].Role != "user" {
			return fmt.Errorf("Please ensure that function call turn comes immediately after a user turn or after a function response turn. (contents[%d])", i)
		}
		if responses == 0 {
			if i > 0 && countCalls(r.Contents[i-1]) > 0 {
				return fmt.Errorf("Please ensure that function response turn comes immediately after a function call turn. (contents[%d] answers none of the calls of contents[%d])", i, i-1)
			}
			continue
		}
		if i == 0 || countCalls(r.Contents[i-1]) == 0 {
			return fmt.Errorf("Please ensure that function response turn comes immediately after a function call turn. (contents[%d])", i)
		}
		prev := r.Contents[i-1]
		if want := countCalls(prev); responses != want {
			return fmt.Errorf("Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn. (contents[%d] has %d, contents[%d] has %d)", i, responses, i-1, want)
		}
		if err := matchResponses(prev, c, i); err != nil {
			return err
		}
	}
	return nil
}

// matchResponses checks each response answers a call of the turn before:
// by id where the call has one, else by name in call order.
func matchResponses(calls, responses content, i int) error {
	var want []string
	for _, p := range calls.Parts {
		if p.FunctionCall != nil {
			want = append(want, p.FunctionCall.ID+"|"+p.FunctionCall.Name)
		}
	}
	k := 0
	for _, p := range responses.Parts {
		fr := p.FunctionResponse
		if fr == nil {
			continue
		}
		if got := fr.ID + "|" + fr.Name; got != want[k] {
			return fmt.Errorf("* GenerateContentRequest.contents[%d]: function response %d (id %q, name %q) does not match function call %d (%s)", i, k, fr.ID, fr.Name, k, want[k])
		}
		k++
	}
	return nil
}

// validateSignatures checks, in the turn being continued (after the last
// user turn that is not only function responses), that the first function
// call of every model turn carries a signature, as Gemini 3 does; and
// anywhere, that a signature is one this server issued or a documented
// bypass value (a signature from another provider is refused).
func (s *Server) validateSignatures(r *request) error {
	current := 0
	for i, c := range r.Contents {
		if c.Role == "user" && countResponses(c) < len(c.Parts) {
			current = i + 1
		}
	}
	for i, c := range r.Contents {
		first := true
		for j, p := range c.Parts {
			if p.ThoughtSignature != nil && !bypassSignatures[*p.ThoughtSignature] && !s.issued(*p.ThoughtSignature) {
				return fmt.Errorf("Unable to submit request because Thought signature is not valid. (contents[%d].parts[%d])", i, j)
			}
			if p.FunctionCall == nil {
				continue
			}
			if first && i >= current && p.ThoughtSignature == nil {
				return fmt.Errorf("Unable to submit request because function call `%s` in the %d. content block is missing a `thought_signature`.", p.FunctionCall.Name, i+1)
			}
			first = false
		}
	}
	return nil
}

func countCalls(c content) int {
	n := 0
	for _, p := range c.Parts {
		if p.FunctionCall != nil {
			n++
		}
	}
	return n
}

func countResponses(c content) int {
	n := 0
	for _, p := range c.Parts {
		if p.FunctionResponse != nil {
			n++
		}
	}
	return n
}

func isObject(raw json.RawMessage) bool {
	var obj map[string]json.RawMessage
	return json.Unmarshal(raw, &obj) == nil && obj != nil
}

// isBase64 accepts what proto JSON accepts for bytes: standard or URL-safe
// base64, padded or not.
func isBase64(s string) bool {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if _, err := enc.DecodeString(s); err == nil {
			return true
		}
	}
	return false
}
