package config

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
)

// The schema of the file is the Config struct itself: its mapstructure tags
// name the keys. These helpers walk it so that unknown keys, wrong types and
// the list of every key come from one place and cannot drift from the structs.

var durationType = reflect.TypeFor[time.Duration]()

// structKeys maps each key of a config struct to its Go type, with embedded
// ",squash" structs flattened into their parent.
func structKeys(t reflect.Type) map[string]reflect.Type {
	keys := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
		if opts == "squash" {
			maps.Copy(keys, structKeys(f.Type))
			continue
		}
		if name == "" || name == "-" {
			continue
		}
		keys[name] = f.Type
	}
	return keys
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// isNested reports whether values of t are written as a YAML mapping whose
// keys the schema knows (a struct) or names freely (a map of structs).
func isNested(t reflect.Type) bool {
	t = deref(t)
	return t.Kind() == reflect.Struct && t != durationType ||
		t.Kind() == reflect.Map && deref(t.Elem()).Kind() == reflect.Struct
}

// schemaField is one leaf key of the schema and the Go type it decodes into.
type schemaField struct {
	path string
	typ  reflect.Type
}

// schemaFields lists every leaf key under t as a dotted path; entries of a
// map of structs appear as "*" (providers.*.api_key). A map of strings
// (headers, env) is a leaf.
func schemaFields(prefix string, t reflect.Type) []schemaField {
	t = deref(t)
	if t.Kind() == reflect.Map {
		return schemaFields(joinPath(prefix, "*"), t.Elem())
	}
	var out []schemaField
	keys := structKeys(t)
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if isNested(keys[k]) {
			out = append(out, schemaFields(joinPath(prefix, k), keys[k])...)
			continue
		}
		out = append(out, schemaField{joinPath(prefix, k), keys[k]})
	}
	return out
}

func joinPath(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// checkKeys reports every key of m (a mapping decoded into t) that t does not
// know, with its full path and the closest known key as a hint.
// Under channels, the sections' names are keys too, each of its own type.
func checkKeys(path string, m map[string]any, t reflect.Type, lines lineIndex, sections []ChannelSection) []error {
	t = deref(t)
	var keys map[string]reflect.Type
	if t.Kind() == reflect.Struct {
		keys = structKeys(t)
	}
	if path == "channels" {
		keys = sectionKeys(sections)
	}
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(m)) {
		p := joinPath(path, k)
		var sub reflect.Type
		switch t.Kind() {
		case reflect.Struct:
			ft, ok := keys[k]
			if !ok {
				errs = append(errs, fmt.Errorf("%s: unknown key%s", p, lines.hint(p, suggest(k, keys))))
				continue
			}
			sub = ft
		case reflect.Map:
			sub = t.Elem()
		default:
			continue
		}
		if nested, ok := m[k].(map[string]any); ok && isNested(sub) {
			errs = append(errs, checkKeys(p, nested, sub, lines, sections)...)
		}
	}
	return errs
}

// suggest returns the known key closest to a misspelt one, or "".
func suggest(key string, known map[string]reflect.Type) string {
	best, bestDist := "", 3 // more than two edits away is not a typo
	for _, k := range slices.Sorted(maps.Keys(known)) {
		if d := editDistance(strings.ToLower(key), k); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// typeError is a value that cannot become the type its key needs.
type typeError struct{ msg string }

func (e *typeError) Error() string { return e.msg }

func mismatch(want string, got any) error {
	return &typeError{msg: fmt.Sprintf("expected %s, got %s", want, describe(got))}
}

// describe renders a value the way the user wrote it, for error messages.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "nothing"
	case string:
		return strconv.Quote(x)
	case []any, []string:
		return "a list"
	case map[string]any:
		return "a mapping"
	default:
		return fmt.Sprint(x)
	}
}

// convert is the decode hook: it turns what YAML, the environment (always
// strings) and ${VAR} expansion produce into the type of the target field,
// and says plainly what was expected when it cannot. Weak typing is off, so
// this is the only conversion there is: `enabled: 1` or `timeout: 60` are
// errors instead of silent guesses.
func convert(from, to reflect.Value) (any, error) {
	var v any
	if from.IsValid() {
		v = from.Interface()
	}
	t := to.Type()
	if t == durationType {
		return toDuration(v)
	}
	switch t.Kind() {
	case reflect.String:
		return toString(v)
	case reflect.Bool:
		return toBool(v)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return toInt(v, t.Bits())
	case reflect.Float32, reflect.Float64:
		return toFloat(v)
	case reflect.Slice:
		switch x := v.(type) {
		case string: // from the environment: comma-separated
			return splitList(x), nil
		case []any, []string:
			return x, nil
		}
		return nil, mismatch("a list", v)
	case reflect.Map, reflect.Struct:
		if _, ok := v.(map[string]any); ok {
			return v, nil
		}
		return nil, mismatch("a mapping (key: value)", v)
	}
	return v, nil
}

func toDuration(v any) (any, error) {
	s, ok := v.(string)
	if !ok {
		return nil, mismatch(`a duration with a unit such as "60s" or "5m"`, v)
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return nil, mismatch(`a duration such as "60s", "5m" or "1h30m"`, v)
	}
	return d, nil
}

func toString(v any) (any, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case int, int64, uint64:
		// Numeric ids (allow_from: [123456]) are written without quotes.
		return fmt.Sprint(x), nil
	case float64:
		if x == float64(int64(x)) {
			return strconv.FormatInt(int64(x), 10), nil
		}
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	}
	return nil, mismatch("a string", v)
}

func toBool(v any) (any, error) {
	switch x := v.(type) {
	case bool:
		return x, nil
	case string:
		if b, err := strconv.ParseBool(strings.TrimSpace(x)); err == nil {
			return b, nil
		}
	}
	return nil, mismatch("true or false", v)
}

func toInt(v any, bits int) (any, error) {
	var n int64
	switch x := v.(type) {
	case int:
		n = int64(x)
	case int64:
		n = x
	case uint64:
		if x > 1<<63-1 {
			return nil, mismatch("a smaller integer", v)
		}
		n = int64(x)
	case float64:
		if x != float64(int64(x)) {
			return nil, mismatch("an integer", v)
		}
		n = int64(x)
	case string:
		parsed, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		if err != nil {
			return nil, mismatch("an integer", v)
		}
		n = parsed
	default:
		return nil, mismatch("an integer", v)
	}
	if bits < 64 && (n > 1<<(bits-1)-1 || n < -1<<(bits-1)) {
		return nil, mismatch("a smaller integer", v)
	}
	return n, nil
}

func toFloat(v any) (any, error) {
	switch x := v.(type) {
	case int:
		return float64(x), nil
	case int64:
		return float64(x), nil
	case uint64:
		return float64(x), nil
	case float64:
		return x, nil
	case string:
		if f, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil {
			return f, nil
		}
	}
	return nil, mismatch("a number", v)
}

// splitList reads a comma-separated environment value as a list.
func splitList(s string) []string {
	out := []string{}
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// decode turns the merged settings into a Config, reporting every value that
// has the wrong type with its key path.
func decode(settings map[string]any, lines lineIndex) (*Config, []error) {
	var cfg Config
	if err := decodeInto(settings, &cfg); err != nil {
		return nil, decodeProblems(err, lines)
	}
	return &cfg, nil
}

// decodeInto decodes settings into result (a pointer) with the schema's
// conversions and exact key names.
func decodeInto(settings map[string]any, result any) error {
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		DecodeHook: mapstructure.DecodeHookFuncValue(convert),
		Result:     result,
		MatchName:  func(key, field string) bool { return key == field },
	})
	if err != nil {
		return fmt.Errorf("decoder: %w", err)
	}
	return dec.Decode(settings)
}

// decodeProblems flattens mapstructure's joined errors into one error per key,
// with the key written the way the file writes it (providers.ollama.timeout,
// not providers[ollama].timeout).
func decodeProblems(err error, lines lineIndex) []error {
	//lint:ignore errorlint it flattens the tree itself, one node at a time
	switch e := err.(type) {
	case *mapstructure.DecodeError:
		path := mapstructurePath(e.Name())
		msg := e.Unwrap().Error()
		var te *typeError
		if errors.As(e.Unwrap(), &te) {
			msg = te.msg
		}
		return []error{fmt.Errorf("%s: %s%s", path, msg, lines.hint(path, ""))}
	case interface{ Unwrap() []error }:
		var out []error
		for _, inner := range e.Unwrap() {
			out = append(out, decodeProblems(inner, lines)...)
		}
		return out
	case interface{ Unwrap() error }: // Decode wraps the joined errors in a heading
		return decodeProblems(e.Unwrap(), lines)
	}
	return []error{err}
}

// mapstructurePath rewrites "a[b].c[0]" as "a.b.c[0]": map keys become path
// elements, list indexes stay indexes.
func mapstructurePath(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		if name[i] != '[' {
			b.WriteByte(name[i])
			continue
		}
		end := strings.IndexByte(name[i:], ']')
		if end < 0 {
			b.WriteString(name[i:])
			break
		}
		inner := name[i+1 : i+end]
		if _, err := strconv.Atoi(inner); err == nil {
			b.WriteString(name[i : i+end+1])
		} else {
			b.WriteString("." + inner)
		}
		i += end
	}
	return b.String()
}
