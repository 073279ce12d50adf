package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/url"
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
			// Context fields are encoded lazily, on the first line written.
			From(WithFields(context.Background(), zap.String("k", key)), log).Info("lazily")
			_ = log.Sync()
			got := out.String()
			if strings.Contains(got, token) || strings.Contains(got, key) {
				t.Fatalf("secret leaked:\n%s", got)
			}
			if strings.Count(got, "[REDACTED]") < 8 {
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

func TestContextFieldsReachEveryLogger(t *testing.T) {
	var out bytes.Buffer
	base, err := New(Options{Level: "debug", Format: "json", Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	ctx := WithFields(context.Background(), zap.String("turn", "t1"))
	ctx = WithFields(ctx, zap.String("session", "telegram:1"))
	From(ctx, base.Named("router")).Warn("retrying")
	From(context.Background(), base.Named("tools")).Info("no turn")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines = %q", lines)
	}
	var first, second map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &second); err != nil {
		t.Fatal(err)
	}
	if first["turn"] != "t1" || first["session"] != "telegram:1" || first["logger"] != "router" {
		t.Errorf("context fields missing: %v", first)
	}
	if _, ok := second["turn"]; ok {
		t.Errorf("a context without fields added some: %v", second)
	}
	if From(context.Background(), base) != base {
		t.Error("From should return the logger itself when the context carries nothing")
	}
}

func TestSecretsRedactedInEveryEncoding(t *testing.T) {
	const token = `123456:AAH-secret"part\x`
	for _, line := range []string{
		"POST /bot" + token + "/getMe",                 // as is
		"token=" + url.QueryEscape(token),              // a form or query value
		"path /bot" + url.PathEscape(token) + "/getMe", // an escaped path
	} {
		var out bytes.Buffer
		log, err := New(Options{Format: "json", Secrets: []string{token}, Out: &out})
		if err != nil {
			t.Fatal(err)
		}
		log.Info(line, zap.String("field", line))
		got := out.String()
		for _, leak := range []string{"AAH-secret", url.QueryEscape(token)} {
			if strings.Contains(got, leak) {
				t.Errorf("%q leaked into %s", leak, got)
			}
		}
		if strings.Count(got, "[REDACTED]") != 2 {
			t.Errorf("want the message and the field redacted: %s", got)
		}
	}
}
