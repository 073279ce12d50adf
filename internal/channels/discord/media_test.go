package discord

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/bus"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
)

func TestOutboundFilesStayInTheWorkspace(t *testing.T) {
	ws := t.TempDir()
	outside := t.TempDir()
	write := func(dir, name, data string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(ws, "notes.md", "notes")
	write(ws, "sessions/discord_1.jsonl", "secret history")
	write(ws, "big.bin", strings.Repeat("x", 101))
	write(outside, "secret.txt", "secret")
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(ws, "link.txt")); err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{Token: "t", MaxMediaBytes: 100, Access: config.Access{Policy: "open"}},
		Deps{Bus: bus.New(1), Workspace: ws}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path    string
		want    string // content, or "" for refused
		errPart string
	}{
		{"notes.md", "notes", ""},
		{filepath.Join(ws, "notes.md"), "notes", ""},
		{"../" + filepath.Base(outside) + "/secret.txt", "", "not allowed"},
		{filepath.Join(outside, "secret.txt"), "", "not allowed"},
		{"sessions/discord_1.jsonl", "", "sessions/"},
		{"./sessions/../sessions/discord_1.jsonl", "", "sessions/"},
		{"link.txt", "", "link.txt"},
		{"sessions", "", "sessions/"},
		{"big.bin", "", "upload limit"},
		{"missing.txt", "", "no such file"},
	}
	for _, tt := range tests {
		files, err := c.outboundFiles([]llm.Part{{Kind: llm.PartFileRef, File: &llm.FileRef{Path: tt.path}}})
		if tt.want == "" {
			if err == nil || !strings.Contains(err.Error(), tt.errPart) {
				t.Errorf("%s: err %v, want refusal mentioning %q", tt.path, err, tt.errPart)
			}
			continue
		}
		if err != nil || len(files) != 1 {
			t.Errorf("%s: %v", tt.path, err)
			continue
		}
		data, _ := io.ReadAll(files[0].Reader)
		if string(data) != tt.want || files[0].Name != "notes.md" || !strings.HasPrefix(files[0].ContentType, "text/markdown") {
			t.Errorf("%s: file %q %q %q", tt.path, files[0].Name, files[0].ContentType, data)
		}
	}
}

func TestNewValidates(t *testing.T) {
	good := Config{Token: "t", Access: config.Access{Policy: "allowlist", AllowFrom: []string{"1"}}}
	tests := []struct {
		name   string
		mod    func(*Config)
		errHas string
	}{
		{"empty token", func(c *Config) { c.Token = " " }, "token"},
		{"empty allowlist", func(c *Config) { c.AllowFrom = nil }, "allow_from"},
		{"bad policy", func(c *Config) { c.Policy = "maybe" }, "policy"},
		{"bad api_url", func(c *Config) { c.APIURL = "ftp://x" }, "api_url"},
		{"pairing without a store", func(c *Config) { c.Policy = "pairing" }, "pairing"},
	}
	for _, tt := range tests {
		cfg := good
		tt.mod(&cfg)
		if _, err := New(cfg, Deps{Bus: bus.New(1)}, zaptest.NewLogger(t)); err == nil || !strings.Contains(err.Error(), tt.errHas) {
			t.Errorf("%s: New = %v, want an error about %s", tt.name, err, tt.errHas)
		}
	}
	c, err := New(good, Deps{Bus: bus.New(1)}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if c.token != "t" || c.sess.Token != "Bot t" || c.sess.Identify.Token != "t" {
		t.Errorf("token handling: %q %q %q", c.token, c.sess.Token, c.sess.Identify.Token)
	}
	if c2, _ := New(Config{Token: "Bot t", Access: good.Access}, Deps{Bus: bus.New(1)}, zaptest.NewLogger(t)); c2.token != "t" {
		t.Errorf("a token given with its Bot prefix kept it: %q", c2.token)
	}
}
