package tools

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzValidateArgs feeds arbitrary argument text through the casts and the
// validator, against a test schema using most keywords and against the
// built-in tools' schemas. It must never panic; what it accepts must be a
// JSON object that validates again unchanged (casts are idempotent).
func FuzzValidateArgs(f *testing.F) {
	for _, seed := range []string{
		`{"path":"a.md","offset":3}`, `{"path":5}`, `{"path":"a","ids":"[1,\"2\"]"}`,
		`{"path":"a","opt":"{\"depth\":\"2\"}"}`, `{"path":null}`, `[1,2]`, `null`, ``,
		`{"path":"a","ratio":1e999}`, `{"path":"a","either":"TRUE"}`, `{"path":"a","id":123456789012345678901234}`,
		`{"path":"a","ids":[[[]]]}`, `{"path":"\u0000"}`, `{"path":"a"} x`,
	} {
		f.Add(seed)
	}
	params := []json.RawMessage{
		json.RawMessage(echoParams),
		(&ReadFile{}).Spec().Parameters,
		(&EditFile{}).Spec().Parameters,
		(&ListDir{}).Spec().Parameters,
		(&Message{}).Spec().Parameters,
	}
	var schemas []*argSchema
	for _, p := range params {
		s, err := compileSchema(p)
		if err != nil {
			f.Fatal(err)
		}
		schemas = append(schemas, s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		for _, schema := range schemas {
			out, err := schema.prepare(json.RawMessage(raw))
			if err != nil {
				if err.Error() == "" {
					t.Fatalf("empty error for %q", raw)
				}
				continue
			}
			var obj map[string]any
			if err := json.Unmarshal(out, &obj); err != nil {
				t.Fatalf("accepted %q but produced %q, not a JSON object: %v", raw, out, err)
			}
			again, err := schema.prepare(out)
			if err != nil {
				t.Fatalf("output %q of %q no longer validates: %v", out, raw, err)
			}
			if !bytes.Equal(again, out) {
				t.Fatalf("casts not idempotent: %q -> %q -> %q", raw, out, again)
			}
		}
	})
}
