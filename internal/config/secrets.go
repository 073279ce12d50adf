package config

import (
	"cmp"
	"maps"
	"net/url"
	"reflect"
	"slices"
	"strings"
)

// minSecretLen is the shortest value Secrets returns. Shorter values are
// placeholders (api_key: ollama, none, true) rather than credentials, and
// redacting them from every log line would blank out ordinary words.
const minSecretLen = 8

// mask is what a secret is replaced with in Redacted.
const mask = "***"

// secretWords mark a header or environment variable name as holding a
// secret (Authorization, X-Api-Key, GITHUB_TOKEN, DB_PASSWORD, ...).
var secretWords = []string{"key", "token", "secret", "passw", "auth", "credential", "cookie", "session", "private"}

// looksSecret reports whether a header or variable name suggests a secret.
func looksSecret(name string) bool {
	name = strings.ToLower(name)
	for _, w := range secretWords {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// The secret tag marks, where a field is declared, what of it is secret;
// Secrets and Redacted find them all by reflection over the whole Config,
// the channels' sections (Channels.Kinds) included, so a new field is
// redacted in logs, status, doctor and the panel by its tag alone.
// TestSecretsAreTagged fails for a field whose name looks secret but has
// no tag.
const (
	// SecretValue: the value is a secret (a string, or every value of a
	// map of strings).
	SecretValue = "true"
	// SecretURL: a URL whose password and secret-looking query values
	// (?api_key=) are secrets.
	SecretURL = "url"
	// SecretNames: a map of strings (headers, environment) whose values
	// under secret-looking names (Authorization, GITHUB_TOKEN) are secrets.
	SecretNames = "names"
	// SecretNATS: a comma-separated list of NATS URLs, each with a
	// password or a bare token as its user (nats://TOKEN@host).
	SecretNATS = "nats"
	// SecretNot: the name looks secret but the value is not one (the path
	// of a key file); it says that someone looked.
	SecretNot = "no"
)

// secretTag is the struct tag the marks above are written in.
const secretTag = "secret"

// Secrets returns every configured secret value: each field marked with
// the secret tag, passwords in URLs, and header and MCP environment values
// whose names look secret. A secret of the form "<id>:<secret>" (a
// Telegram bot token: the id is the bot's public user id) also yields its
// tail, which must never show even on its own. Values shorter than 8
// characters are left out (see minSecretLen). The list has no duplicates
// and is ordered longest first, so a redactor replacing them in turn never
// leaves the tail of a longer secret that contains a shorter one.
//
// It feeds log redaction and the scrubbing of the exec tool's environment.
func (c *Config) Secrets() []string {
	var s []string
	add := func(v string) {
		if len(v) >= minSecretLen && !slices.Contains(s, v) {
			s = append(s, v)
		}
	}
	walkSecrets(reflect.ValueOf(c).Elem(), func(mark string, v reflect.Value) {
		for _, secret := range secretsOf(mark, v) {
			add(secret)
			if _, tail, ok := strings.Cut(secret, ":"); ok && mark == SecretValue {
				add(tail)
			}
		}
	})
	slices.SortFunc(s, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b))
	})
	return s
}

// secretsOf returns the secrets a field marked mark holds.
func secretsOf(mark string, v reflect.Value) []string {
	var out []string
	switch mark {
	case SecretValue:
		if v.Kind() == reflect.String {
			return []string{v.String()}
		}
		if m, ok := v.Interface().(map[string]string); ok {
			for _, k := range slices.Sorted(maps.Keys(m)) {
				out = append(out, m[k])
			}
		}
	case SecretURL:
		return urlSecrets(v.String())
	case SecretNames:
		m, _ := v.Interface().(map[string]string)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if looksSecret(k) {
				out = append(out, m[k])
			}
		}
	case SecretNATS:
		for _, u := range natsURLs(v.String()) {
			out = append(out, urlSecrets(u)...)
			out = append(out, natsToken(u))
		}
	}
	return out
}

// walkSecrets calls visit with every marked field under v (a struct,
// map, pointer or interface), at any depth.
func walkSecrets(v reflect.Value, visit func(mark string, v reflect.Value)) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walkSecrets(v.Elem(), visit)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			if mark := f.Tag.Get(secretTag); mark != "" {
				if mark != SecretNot {
					visit(mark, v.Field(i))
				}
				continue
			}
			walkSecrets(v.Field(i), visit)
		}
	case reflect.Map:
		if !holdsSecrets(v.Type().Elem()) {
			return
		}
		for _, k := range v.MapKeys() {
			walkSecrets(v.MapIndex(k), visit)
		}
	case reflect.Slice:
		if !holdsSecrets(v.Type().Elem()) {
			return
		}
		for i := range v.Len() {
			walkSecrets(v.Index(i), visit)
		}
	}
}

// holdsSecrets reports whether values of t may hold marked fields.
func holdsSecrets(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Struct, reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice:
		return true
	}
	return false
}

// urlSecrets returns the password and the secret-looking query values of a
// URL (https://user:pass@host, ...?api_key=...).
func urlSecrets(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil || raw == "" {
		return nil
	}
	var out []string
	if pw, ok := u.User.Password(); ok {
		out = append(out, pw)
	}
	for k, vs := range u.Query() {
		if looksSecret(k) {
			out = append(out, vs...)
		}
	}
	return out
}

// Redacted returns a copy of c with every secret replaced by "***" (any
// length, unlike Secrets), for `nanobot status` and debugging output. It
// copies what it changes (maps, sections); c itself is not changed.
func (c Config) Redacted() Config {
	return redactValue(reflect.ValueOf(c)).Interface().(Config)
}

// redactValue returns a copy of v with every marked field masked; values
// that hold no marked field are shared, not copied.
func redactValue(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		p := reflect.New(v.Type().Elem())
		p.Elem().Set(redactValue(v.Elem()))
		return p
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type()).Elem()
		out.Set(redactValue(v.Elem()))
		return out
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		out.Set(v)
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			if mark := f.Tag.Get(secretTag); mark != "" {
				out.Field(i).Set(maskField(mark, v.Field(i)))
				continue
			}
			out.Field(i).Set(redactValue(v.Field(i)))
		}
		return out
	case reflect.Map:
		if v.IsNil() || !holdsSecrets(v.Type().Elem()) {
			return v
		}
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		for _, k := range v.MapKeys() {
			out.SetMapIndex(k, redactValue(v.MapIndex(k)))
		}
		return out
	}
	return v
}

// maskField returns the value of a field marked mark with its secrets
// masked.
func maskField(mark string, v reflect.Value) reflect.Value {
	switch mark {
	case SecretValue:
		if v.Kind() == reflect.String {
			return reflect.ValueOf(maskValue(v.String())).Convert(v.Type())
		}
		if m, ok := v.Interface().(map[string]string); ok && m != nil {
			out := make(map[string]string, len(m))
			for k, s := range m {
				out[k] = maskValue(s)
			}
			return reflect.ValueOf(out)
		}
	case SecretURL:
		return reflect.ValueOf(redactURL(v.String())).Convert(v.Type())
	case SecretNames:
		m, _ := v.Interface().(map[string]string)
		return reflect.ValueOf(redactMap(m))
	case SecretNATS:
		urls := natsURLs(v.String())
		if len(urls) == 0 {
			return v
		}
		for i, u := range urls {
			if tok := natsToken(u); tok != "" {
				u = strings.Replace(u, tok+"@", mask+"@", 1)
			}
			urls[i] = redactURL(u)
		}
		return reflect.ValueOf(strings.Join(urls, ","))
	}
	return v
}

// UntaggedSecrets lists the keys under t (a config struct, its keys
// written under prefix) whose name looks like it holds a secret (token,
// key, secret, password, credential) but whose field has no secret tag:
// a field redaction would miss. Tests run it over Config and every
// channel's section.
func UntaggedSecrets(prefix string, t reflect.Type) []string {
	var out []string
	t = deref(t)
	if t.Kind() == reflect.Map || t.Kind() == reflect.Slice {
		return UntaggedSecrets(joinPath(prefix, "*"), t.Elem())
	}
	if t.Kind() != reflect.Struct || t == durationType {
		return nil
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
		key := joinPath(prefix, name)
		if opts == "squash" {
			key = prefix
		}
		if f.Tag.Get(secretTag) != "" || name == "-" || !f.IsExported() {
			continue
		}
		ft := deref(f.Type)
		switch {
		case ft.Kind() == reflect.Struct && ft != durationType, ft.Kind() == reflect.Slice && deref(ft.Elem()).Kind() == reflect.Struct,
			ft.Kind() == reflect.Map && deref(ft.Elem()).Kind() == reflect.Struct:
			out = append(out, UntaggedSecrets(key, f.Type)...)
		case ft.Kind() == reflect.String || ft.Kind() == reflect.Map || ft.Kind() == reflect.Slice:
			if looksLikeCredential(name) || looksLikeCredential(f.Name) {
				out = append(out, key)
			}
		}
	}
	return out
}

// credentialWords mark a key as one that may hold a credential.
var credentialWords = []string{"token", "key", "secret", "passw", "credential", "auth"}

func looksLikeCredential(name string) bool {
	name = strings.ToLower(name)
	for _, w := range credentialWords {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

func maskValue(v string) string {
	if v == "" {
		return ""
	}
	return mask
}

// redactMap copies m with the values of secret-looking names masked.
func redactMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := maps.Clone(m)
	for k, v := range out {
		if looksSecret(k) {
			out[k] = maskValue(v)
		}
	}
	return out
}

// redactURL masks the password and secret-looking query values of a URL.
// A value that does not parse but might carry credentials is masked whole.
func redactURL(raw string) string {
	if raw == "" {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		if strings.ContainsAny(raw, "@?") {
			return mask
		}
		return raw
	}
	changed := false
	// The URL encoder escapes "*"; write a plain marker and swap it after.
	const marker = "REDACTEDSECRET"
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), marker)
		changed = true
	}
	// Rewrite the query pair by pair, keeping its order and encoding.
	pairs := strings.Split(u.RawQuery, "&")
	for i, pair := range pairs {
		k, _, hasValue := strings.Cut(pair, "=")
		if name, err := url.QueryUnescape(k); err == nil && hasValue && looksSecret(name) {
			pairs[i] = k + "=" + mask
			changed = true
		}
	}
	if !changed {
		return raw
	}
	u.RawQuery = strings.Join(pairs, "&")
	return strings.Replace(u.String(), ":"+marker+"@", ":"+mask+"@", 1)
}

// natsURLs splits bus.nats.url, a comma-separated list of servers.
func natsURLs(raw string) []string {
	var out []string
	for _, u := range strings.Split(raw, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// natsToken returns the token of a NATS URL that carries one as its bare
// user (nats://TOKEN@host, NATS's token authentication), else "".
func natsToken(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return ""
	}
	if _, ok := u.User.Password(); ok {
		return ""
	}
	return u.User.Username()
}
