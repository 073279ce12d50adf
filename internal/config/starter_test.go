package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestStarterYAMLLoadsAndValidates(t *testing.T) {
	for _, ws := range []string{"~/.nanobot/workspace", "/srv/my bot/ws", "/tmp/weird: name #1", "C:\\bots\\ws", "/a/${HOME}/b"} {
		t.Run(ws, func(t *testing.T) {
			isolateEnv(t, "OPENAI_API_KEY")
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := WriteStarter(path, StarterYAML(ws, testSections...)); err != nil {
				t.Fatal(err)
			}
			// Without the key the file loads and validates: the provider
			// is degraded and names the variable.
			bare, err := Load(path, testSections...)
			if err != nil {
				t.Fatalf("Load without OPENAI_API_KEY: %v", err)
			}
			if err := bare.Validate(); err != nil {
				t.Errorf("Validate without OPENAI_API_KEY: %v", err)
			}
			if p := bare.ProviderProblem("openai"); !strings.Contains(p, "OPENAI_API_KEY is not set") {
				t.Errorf("ProviderProblem without OPENAI_API_KEY = %q, want the variable named", p)
			}
			t.Setenv("OPENAI_API_KEY", "sk-starter-0123456789")
			cfg, err := Load(path, testSections...)
			if err != nil {
				t.Fatalf("Load: %v\n%s", err, StarterYAML(ws, testSections...))
			}
			if err := cfg.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if cfg.Providers["openai"].APIKey != "sk-starter-0123456789" {
				t.Errorf("api_key = %q", cfg.Providers["openai"].APIKey)
			}
			want := resolvePath(ws, filepath.Dir(path))
			if cfg.Agents.Workspace != want {
				t.Errorf("workspace = %q, want %q", cfg.Agents.Workspace, want)
			}
			if keyOf[bool](t, cfg, "channels.telegram.enabled") || keyOf[bool](t, cfg, "channels.discord.enabled") {
				t.Error("starter enables a channel")
			}
		})
	}
}

func TestWriteStarter(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", ".nanobot")
	path := filepath.Join(dir, "config.yaml")
	if err := WriteStarter(path, []byte("first\n")); err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" {
		for p, want := range map[string]os.FileMode{path: 0o600, dir: 0o700} {
			info, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if got := info.Mode().Perm(); got != want {
				t.Errorf("%s mode = %04o, want %04o", p, got, want)
			}
		}
	}
	err := WriteStarter(path, []byte("second\n"))
	if !errors.Is(err, fs.ErrExist) {
		t.Errorf("second WriteStarter: %v, want fs.ErrExist", err)
	}
	if data, _ := os.ReadFile(path); string(data) != "first\n" {
		t.Errorf("file = %q after a refused overwrite", data)
	}
	if err := CheckPermissions(path); err != nil {
		t.Errorf("CheckPermissions on a fresh starter: %v", err)
	}
}

func TestCheckPermissions(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("file modes do not describe access on Windows")
	}
	tests := []struct {
		mode os.FileMode
		bad  bool
	}{
		{0o600, false},
		{0o400, false},
		{0o700, false},
		{0o640, true},
		{0o604, true},
		{0o644, true},
		{0o620, true},
		{0o666, true},
	}
	for _, tt := range tests {
		path := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, tt.mode); err != nil {
			t.Fatal(err)
		}
		err := CheckPermissions(path)
		if (err != nil) != tt.bad {
			t.Errorf("mode %04o: CheckPermissions = %v, want error %v", tt.mode, err, tt.bad)
		}
		if err != nil && !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("mode %04o: %v, want the fix", tt.mode, err)
		}
	}
	if err := CheckPermissions(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
}
