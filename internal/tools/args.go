package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
)

// argSchema is a tool's parameter schema, compiled once at registration.
type argSchema struct {
	schema   *jsonschema.Schema
	resolved *jsonschema.Resolved
}

// supportedDrafts are the $schema values the validator implements.
var supportedDrafts = []string{
	"",
	"http://json-schema.org/draft-07/schema#",
	"https://json-schema.org/draft-07/schema#",
	"https://json-schema.org/draft/2020-12/schema",
}

// compileSchema parses a tool's parameters. They must describe an object, as
// every provider's function-calling API requires.
func compileSchema(params json.RawMessage) (*argSchema, error) {
	s := new(jsonschema.Schema)
	if err := json.Unmarshal(params, s); err != nil {
		return nil, fmt.Errorf("parameters are not a JSON schema: %w", err)
	}
	if s.Type != "object" {
		return nil, fmt.Errorf(`parameters must be a schema of "type": "object"`)
	}
	if !slices.Contains(supportedDrafts, s.Schema) {
		// Some MCP servers declare older drafts; for the keywords tool schemas
		// use, 2020-12 validates them the same way.
		s.Schema = ""
	}
	resolved, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("parameters schema: %w", err)
	}
	return &argSchema{schema: s, resolved: resolved}, nil
}

// prepare turns a model's raw arguments into the JSON object the tool gets:
// casts where the model's value is an obvious spelling of what the schema
// wants, then validation. Errors name the argument at fault.
func (a *argSchema) prepare(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	v, err := decodeJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("arguments are not valid JSON: %w", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("arguments must be a JSON object, got %s", jsonKind(v))
	}
	v, err = coerce(v, a.schema, "")
	if err != nil {
		return nil, err
	}
	if err := a.resolved.Validate(v); err != nil {
		return nil, describeValidation(err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("arguments: %w", err)
	}
	return out, nil
}

// decodeJSON decodes one JSON value keeping numbers exact (json.Number), so
// a 19-digit id passed as a number can become the exact string the schema
// wants.
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return v, nil
}

// coerce applies the registry's simple casts
// (docs/tools.md#every-call-the-registry) to v, guided by schema s, and turns
// every json.Number into int64 or float64 for the validator. path names v in
// error messages.
//
// Casts: a string holding a number or boolean where the schema wants one
// ("5" -> 5, "true" -> true); a number or boolean where it wants a string
// (5 -> "5"); a string holding a JSON array or object where it wants one; and
// null for an optional property that does not allow null means "absent".
// Nothing else is guessed: schemas combined with anyOf/oneOf/$ref are only
// validated.
func coerce(v any, s *jsonschema.Schema, path string) (any, error) {
	want := wantedTypes(s)
	switch x := v.(type) {
	case json.Number:
		if allowsOnly(want, "string") {
			return x.String(), nil
		}
		return number(x, path)
	case string:
		if len(want) == 0 || slices.Contains(want, "string") {
			return x, nil
		}
		if c, ok := castString(x, want); ok {
			return coerce(c, s, path)
		}
		return x, nil
	case bool:
		if allowsOnly(want, "string") {
			return strconv.FormatBool(x), nil
		}
		return x, nil
	case map[string]any:
		return coerceObject(x, s, path)
	case []any:
		var items *jsonschema.Schema
		if s != nil {
			items = s.Items
		}
		for i := range x {
			c, err := coerce(x[i], items, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			x[i] = c
		}
		return x, nil
	}
	return v, nil
}

func coerceObject(m map[string]any, s *jsonschema.Schema, path string) (any, error) {
	for k, val := range m {
		var ps *jsonschema.Schema
		if s != nil {
			ps = s.Properties[k]
			if ps == nil {
				ps = s.AdditionalProperties
			}
		}
		if val == nil && ps != nil && s.Properties[k] != nil &&
			!slices.Contains(s.Required, k) && !slices.Contains(wantedTypes(ps), "null") {
			// Models often send null for "not given"; treat it as such.
			delete(m, k)
			continue
		}
		c, err := coerce(val, ps, joinPath(path, k))
		if err != nil {
			return nil, err
		}
		m[k] = c
	}
	return m, nil
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// wantedTypes returns the JSON types s allows directly (type or a list of
// types), or nil when s does not say.
func wantedTypes(s *jsonschema.Schema) []string {
	switch {
	case s == nil:
		return nil
	case s.Type != "":
		return []string{s.Type}
	default:
		return s.Types
	}
}

func allowsOnly(want []string, typ string) bool {
	return slices.Contains(want, typ) &&
		!slices.Contains(want, "number") && !slices.Contains(want, "integer")
}

// castString reads s as the first of the wanted types it spells.
func castString(s string, want []string) (any, bool) {
	t := strings.TrimSpace(s)
	for _, typ := range want {
		switch typ {
		case "integer", "number":
			if n := json.Number(t); isNumber(t) {
				return n, true
			}
		case "boolean":
			switch strings.ToLower(t) {
			case "true":
				return true, true
			case "false":
				return false, true
			}
		case "array", "object":
			open := byte('[')
			if typ == "object" {
				open = '{'
			}
			if t != "" && t[0] == open {
				if v, err := decodeJSON([]byte(t)); err == nil {
					return v, true
				}
			}
		}
	}
	return nil, false
}

// isNumber reports whether s is a JSON number.
func isNumber(s string) bool {
	if s == "" {
		return false
	}
	var n json.Number
	return json.Unmarshal([]byte(s), &n) == nil
}

// number converts a JSON number for the validator: int64 when it is one,
// float64 otherwise.
func number(n json.Number, path string) (any, error) {
	if i, err := n.Int64(); err == nil {
		return i, nil
	}
	f, err := n.Float64()
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, argError(path, fmt.Sprintf("number %s is out of range", n))
	}
	return f, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number, int64, float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	}
	return "an object"
}

func argError(path, msg string) error {
	if path == "" {
		return errors.New(msg)
	}
	return fmt.Errorf("argument %q: %s", path, msg)
}

// describeValidation rewrites the validator's error, which names schema
// locations ("validating /properties/offset: type: ..."), into one naming
// the argument ("argument \"offset\": ...").
func describeValidation(err error) error {
	// Each level of the chain adds "validating <schema path>: " in front of
	// the level below; the innermost error says what is wrong.
	var schemaPath string
	msg := err.Error()
	for e := err; e != nil; e = errors.Unwrap(e) {
		inner := errors.Unwrap(e)
		if inner == nil {
			msg = e.Error()
			break
		}
		prefix := strings.TrimSuffix(e.Error(), ": "+inner.Error())
		if p, ok := strings.CutPrefix(prefix, "validating "); ok && p != "root" {
			schemaPath = p
		}
	}
	path := argPath(schemaPath)
	if missing, ok := strings.CutPrefix(msg, "required: missing properties: "); ok {
		return argError(path, "missing required argument "+strings.Trim(missing, "[]"))
	}
	if m := typeMismatch().FindStringSubmatch(msg); m != nil {
		got := m[2]
		if got != "null" && len(m[1]) <= 40 && got != "object" && got != "array" {
			got += " " + strconv.Quote(m[1])
		}
		return argError(path, fmt.Sprintf("expected %s, got %s", strings.ReplaceAll(m[3], `"`, ""), got))
	}
	return argError(path, msg)
}

// typeMismatch matches the validator's `type: abc has type "string", want
// "integer"` (or `want one of "a, b"`). It is compiled on the first
// validation error, not at start.
var typeMismatch = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^type: (.*) has type "([a-z]+)", want (.*)$`)
})

// argPath turns a schema location like "/properties/media/items" into the
// argument path "media[]"; other keywords ($defs, allOf/0...) are skipped.
func argPath(schemaPath string) string {
	var b strings.Builder
	segs := strings.Split(strings.TrimPrefix(schemaPath, "/"), "/")
	for i := 0; i < len(segs); i++ {
		switch segs[i] {
		case "properties", "patternProperties":
			if i+1 < len(segs) {
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(segs[i+1])
				i++
			}
		case "items", "additionalProperties":
			b.WriteString("[]")
		}
	}
	return b.String()
}

// DecodeArgs decodes a call's arguments into A, the tool's argument struct.
// The registry has already checked them against the tool's schema, so an
// error means the schema allows what A cannot hold; it names the tool.
func DecodeArgs[A any](tool string, inv Invocation) (A, error) {
	var a A
	if err := json.Unmarshal(inv.Args, &a); err != nil {
		return a, fmt.Errorf("%s: %w", tool, err)
	}
	return a, nil
}
