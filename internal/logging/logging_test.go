package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"go.uber.org/zap"
)

func TestSecretsNeverLogged(t *testing.T) {
	const token = "123456:ABC-telegram-token"
	const key = "sk-proj-abcdefghijklmnop"
	for _, format := range []string{"json", "console"} {
		t.Run(format, func(t *testing.T) {
			var out bytes.Buffer
			log, err := New(Options{Level: "debug", Format: format, Secrets: []string{token, key, "", "abc"}, Out: &out})
			if err != nil {
				t.Fatal(err)
			}
			log = log.With(zap.String("url", "https://api.telegram.org/bot"+token+"/getMe"))
			log.Debug("calling "+key, zap.Error(errors.New("Post https://api.telegram.org/bot"+token+"/sendMessage: timeout")),
				zap.Strings("keys", []string{key}), zap.Any("cfg", map[string]string{"api_key": key}))
			log.Named("x").With(zap.String("k", key)).Info("again")
			_ = log.Sync()
			got := out.String()
			if strings.Contains(got, token) || strings.Contains(got, key) {
				t.Fatalf("secret leaked:\n%s", got)
			}
			if strings.Count(got, "[REDACTED]") < 6 {
				t.Errorf("expected redaction markers:\n%s", got)
			}
			if format == "json" {
				for _, line := range strings.Split(strings.TrimSpace(got), "\n") {
					if !json.Valid([]byte(line)) {
						t.Errorf("redaction broke JSON: %s", line)
					}
				}
			}
		})
	}
}

func TestOptionsValidated(t *testing.T) {
	if _, err := New(Options{Level: "loud"}); err == nil {
		t.Error("bad level accepted")
	}
	if _, err := New(Options{Format: "xml"}); err == nil {
		t.Error("bad format accepted")
	}
	var out bytes.Buffer
	log, err := New(Options{Level: "warn", Format: "auto", Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	log.Warn("shown")
	if strings.Contains(out.String(), "hidden") || !strings.Contains(out.String(), `"msg":"shown"`) {
		t.Errorf("auto on a non-terminal should be JSON at warn: %q", out.String())
	}
}

func TestRedact(t *testing.T) {
	if got := Redact("key=sk-12345678 ok", []string{"sk-12345678"}); got != "key=[REDACTED] ok" {
		t.Errorf("Redact = %q", got)
	}
	redact := Redactor([]string{"sk-12345678", "123:tg-token-abc", "x"})
	if got := redact("sk-12345678 and 123:tg-token-abc, x stays"); got != "[REDACTED] and [REDACTED], x stays" {
		t.Errorf("Redactor = %q", got)
	}
	if got := Redactor(nil)("nothing to hide"); got != "nothing to hide" {
		t.Errorf("Redactor without secrets = %q", got)
	}
}
