package tools

import "strings"

// secretNameParts mark environment variables that carry credentials by
// convention (OPENAI_API_KEY, TELEGRAM_TOKEN, DB_PASSWORD, ...).
var secretNameParts = []string{"TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"}

// minSecretSubstring is the shortest secret that is also looked for inside
// longer values ("Bearer <token>"); shorter ones must match a whole value,
// lest a two-letter secret remove half the environment.
const minSecretSubstring = 8

// scrubEnv returns env without the daemon's secrets: NANOBOT_* variables
// (the configuration, keys included), variables whose names say they hold a
// credential, and variables whose value is or contains one of secrets (the
// keys and tokens from the config, however they are named).
func scrubEnv(env, secrets []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		if !isSecretVar(name, value, secrets) {
			out = append(out, kv)
		}
	}
	return out
}

func isSecretVar(name, value string, secrets []string) bool {
	upper := strings.ToUpper(name)
	if strings.HasPrefix(upper, "NANOBOT_") {
		return true
	}
	for _, part := range secretNameParts {
		if strings.Contains(upper, part) {
			return true
		}
	}
	for _, s := range secrets {
		switch {
		case s == "":
		case value == s:
			return true
		case len(s) >= minSecretSubstring && strings.Contains(value, s):
			return true
		}
	}
	return false
}
