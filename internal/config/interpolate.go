package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// unsetError is a ${NAME} reference without a default whose variable is
// not set. In a key holding a secret it is not a load error but a missing
// secret (Config.Unset): the part that needs it starts degraded.
type unsetError struct{ name string }

func (e *unsetError) Error() string {
	return fmt.Sprintf("environment variable %s is not set (export it, or write ${%s:-default})", e.name, e.name)
}

// lookupFunc reads an environment variable (os.LookupEnv in Load).
type lookupFunc func(name string) (string, bool)

// expand replaces ${NAME} and ${NAME:-default} in s. Only the braced form is
// special, so a password such as "pa$$word" or "$ecret" stays as written;
// "$${" is a literal "${". A variable that is unset (or empty, with a default)
// takes the default; unset without a default is an error.
func expand(s string, lookup lookupFunc) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		if i > 0 && s[i-1] == '$' {
			b.WriteString(s[:i-1] + "${")
			s = s[i+2:]
			continue
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", fmt.Errorf(`"${" without a closing "}" (write "$${" for a literal "${")`)
		}
		ref := s[i+2 : i+end]
		name, def, hasDef := strings.Cut(ref, ":-")
		if !isEnvName(name) {
			return "", fmt.Errorf("invalid variable reference ${%s} (write ${NAME} or ${NAME:-default}; $${ is a literal ${)", ref)
		}
		val, ok := lookup(name)
		switch {
		case ok && val != "":
			b.WriteString(val)
		case hasDef:
			b.WriteString(def)
		case !ok:
			return "", &unsetError{name}
		}
		s = s[i+end+1:]
	}
}

func isEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		letter := r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !letter && (i == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// secretKey reports whether the key at p holds a secret: its name looks
// secret (api_key, token, webhook_secret, a header or variable named
// Authorization or GITHUB_TOKEN), or its map's does (api.keys.<name>). A
// list item is judged by its list's name.
func secretKey(p string) bool {
	if i := strings.IndexByte(p, '['); i >= 0 {
		p = p[:i]
	}
	parts := strings.Split(p, ".")
	if looksSecret(parts[len(parts)-1]) {
		return true
	}
	return len(parts) > 1 && looksSecret(parts[len(parts)-2])
}

// interpolate expands every string in the settings tree in place (map
// values and list items, never keys) and reports each failure with its key.
// An unset variable in a secret's key is no failure: the value is left empty
// and vars records the key and the variable (see Config.SecretVars), as it
// does for a secret read from one variable that is set.
func interpolate(path string, v any, lookup lookupFunc, lines lineIndex, vars map[string]SecretVar) (any, []error) {
	switch x := v.(type) {
	case string:
		out, err := expand(x, lookup)
		var ue *unsetError
		if errors.As(err, &ue) && secretKey(path) {
			// Half a secret is no secret: "Bearer ${TOKEN}" is empty too.
			vars[path] = SecretVar{Name: ue.name}
			return "", nil
		}
		if name, ok := soleRef(x); ok && err == nil && secretKey(path) {
			vars[path] = SecretVar{Name: name, Set: true}
		}
		if err != nil {
			return x, []error{fmt.Errorf("%s: %w%s", path, err, lines.hint(path, ""))}
		}
		return out, nil
	case map[string]any:
		var errs []error
		for _, k := range slices.Sorted(maps.Keys(x)) {
			var e []error
			x[k], e = interpolate(joinPath(path, k), x[k], lookup, lines, vars)
			errs = append(errs, e...)
		}
		return x, errs
	case []any:
		var errs []error
		for i := range x {
			var e []error
			x[i], e = interpolate(fmt.Sprintf("%s[%d]", path, i), x[i], lookup, lines, vars)
			errs = append(errs, e...)
		}
		return x, errs
	case []string:
		var errs []error
		out := make([]string, len(x))
		for i := range x {
			s, e := interpolate(fmt.Sprintf("%s[%d]", path, i), x[i], lookup, lines, vars)
			out[i], errs = s.(string), append(errs, e...)
		}
		return out, errs
	}
	return v, nil
}

// soleRef returns NAME when s is exactly "${NAME}" or "${NAME:-default}".
func soleRef(s string) (string, bool) {
	ref, ok := strings.CutPrefix(s, "${")
	if !ok || !strings.HasSuffix(ref, "}") || strings.Contains(s[2:], "${") {
		return "", false
	}
	name, _, _ := strings.Cut(strings.TrimSuffix(ref, "}"), ":-")
	return name, isEnvName(name)
}
