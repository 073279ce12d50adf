package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// maxDescription is the longest function description OpenAI accepts.
const maxDescription = 1024

// normalizeSchema turns an MCP tool's input schema into one every provider
// accepts as function parameters, keeping its meaning wherever it can:
//
//   - the root is an object schema with properties ("type": "object" is
//     forced; root anyOf/oneOf/allOf branches are merged into the root's
//     properties, since providers reject combinators at the top; "$schema"
//     is dropped);
//   - every object schema has "properties" and every array schema "items"
//     (OpenAI rejects "object schema missing properties" and "array schema
//     missing items"); tuple "items": [...] become "items": {};
//   - boolean subschemas become {} (true) or are dropped with their property
//     (false); "required" names only properties that exist;
//   - draft-04 boolean exclusiveMinimum/exclusiveMaximum become the numeric
//     form; a "$ref" to another document (which nothing here can load)
//     becomes {}.
//
// The server validates the arguments itself, so a looser schema never lets
// a bad call through unnoticed; it only means the model learns less.
func normalizeSchema(in any) (json.RawMessage, error) {
	raw, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers (minimum, enum values) come out as they went in
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	root, ok := v.(map[string]any)
	if !ok || !allowsType(root, "object") {
		root = map[string]any{}
	}
	delete(root, "$schema")
	mergeRootCombinators(root)
	for _, k := range []string{"not", "if", "then", "else"} {
		delete(root, k) // constraints across properties that no provider takes at the top
	}
	root["type"] = "object"
	normalizeNode(root)
	out, err := json.Marshal(root)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	return out, nil
}

// allowsType reports whether schema s allows values of JSON type typ, or
// says nothing about types.
func allowsType(s map[string]any, typ string) bool {
	switch t := s["type"].(type) {
	case nil:
		return true
	case string:
		return t == typ
	case []any:
		return slices.Contains(t, any(typ))
	}
	return false
}

// hasType reports whether s explicitly allows JSON type typ.
func hasType(s map[string]any, typ string) bool {
	return s["type"] != nil && allowsType(s, typ)
}

// mergeRootCombinators folds root allOf/anyOf/oneOf object branches into
// the root: their properties join the root's; allOf's required names stay
// required, anyOf/oneOf's only when every branch requires them.
func mergeRootCombinators(root map[string]any) {
	props, _ := root["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
	}
	required := stringList(root["required"])
	for _, kw := range []string{"allOf", "anyOf", "oneOf"} {
		branches, ok := root[kw].([]any)
		delete(root, kw)
		if !ok {
			continue
		}
		var common []string // required by every anyOf/oneOf branch
		for i, b := range branches {
			bm, ok := b.(map[string]any)
			if !ok {
				continue
			}
			if bp, ok := bm["properties"].(map[string]any); ok {
				for name, ps := range bp {
					if _, dup := props[name]; !dup {
						props[name] = ps
					}
				}
			}
			br := stringList(bm["required"])
			switch {
			case kw == "allOf":
				required = append(required, br...)
			case i == 0:
				common = br
			default:
				common = slices.DeleteFunc(common, func(n string) bool { return !slices.Contains(br, n) })
			}
		}
		required = append(required, common...)
	}
	root["properties"] = props
	if len(required) > 0 {
		root["required"] = toAnyList(required)
	}
}

// Keywords whose values are subschemas, by shape.
var (
	schemaMaps  = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
	schemaLists = []string{"anyOf", "oneOf", "allOf", "prefixItems"}
	schemaOnes  = []string{"additionalProperties", "additionalItems", "contains", "not", "if", "then", "else",
		"propertyNames", "unevaluatedItems", "unevaluatedProperties"}
)

// normalizeNode fixes one schema object and, recursively, its subschemas.
func normalizeNode(s map[string]any) {
	delete(s, "$schema")
	if ref, ok := s["$ref"].(string); ok && !strings.HasPrefix(ref, "#") {
		for k := range s {
			if k != "description" && k != "title" {
				delete(s, k)
			}
		}
		return
	}
	fixExclusive(s, "exclusiveMinimum", "minimum")
	fixExclusive(s, "exclusiveMaximum", "maximum")

	for _, k := range schemaMaps {
		m, ok := s[k].(map[string]any)
		if !ok {
			continue
		}
		for name, sub := range m {
			if fixed, keep := subschema(sub); keep {
				m[name] = fixed
			} else {
				delete(m, name)
			}
		}
	}
	for _, k := range schemaLists {
		l, ok := s[k].([]any)
		if !ok {
			continue
		}
		for i, sub := range l {
			fixed, keep := subschema(sub)
			if !keep {
				fixed = map[string]any{"not": map[string]any{}}
			}
			l[i] = fixed
		}
	}
	for _, k := range schemaOnes {
		switch sub := s[k].(type) {
		case map[string]any:
			normalizeNode(sub)
		case bool:
			// additionalProperties: false and friends are valid booleans.
		}
	}
	switch items := s["items"].(type) {
	case map[string]any:
		normalizeNode(items)
	case bool:
		s["items"] = map[string]any{}
		if !items {
			s["maxItems"] = json.Number("0")
		}
	case nil:
		if hasType(s, "array") {
			s["items"] = map[string]any{}
		}
	default: // draft-04 tuple items
		s["items"] = map[string]any{}
	}
	if hasType(s, "object") {
		if _, ok := s["properties"].(map[string]any); !ok {
			s["properties"] = map[string]any{}
		}
	}
	fixRequired(s)
}

// subschema normalises a subschema given as an object or a boolean; keep is
// false for the schema false (nothing is allowed).
func subschema(v any) (fixed any, keep bool) {
	switch x := v.(type) {
	case map[string]any:
		normalizeNode(x)
		return x, true
	case bool:
		return map[string]any{}, x
	}
	return map[string]any{}, true // not a schema at all: allow anything
}

// fixRequired keeps only unique names of existing properties in "required".
func fixRequired(s map[string]any) {
	if _, ok := s["required"]; !ok {
		return
	}
	props, _ := s["properties"].(map[string]any)
	var req []string
	for _, n := range stringList(s["required"]) {
		if _, ok := props[n]; (ok || props == nil) && !slices.Contains(req, n) {
			req = append(req, n)
		}
	}
	if len(req) == 0 {
		delete(s, "required")
		return
	}
	s["required"] = toAnyList(req)
}

// fixExclusive turns draft-04 {"minimum": 5, "exclusiveMinimum": true} into
// {"exclusiveMinimum": 5}.
func fixExclusive(s map[string]any, exclusive, bound string) {
	b, ok := s[exclusive].(bool)
	if !ok {
		return
	}
	delete(s, exclusive)
	if n, ok := s[bound]; ok && b {
		s[exclusive] = n
		delete(s, bound)
	}
}

func stringList(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func toAnyList(l []string) []any {
	out := make([]any, len(l))
	for i, s := range l {
		out[i] = s
	}
	return out
}

// clipDescription limits a description to what OpenAI accepts (1024
// characters), ending a cut one with "…".
func clipDescription(s string) string {
	s = strings.TrimSpace(s)
	r := []rune(s)
	if len(r) <= maxDescription {
		return s
	}
	return string(r[:maxDescription-1]) + "…"
}
