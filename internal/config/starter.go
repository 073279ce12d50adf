package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"go.yaml.in/yaml/v3"
)

const starterTemplate = `# nanobot configuration, written by ` + "`nanobot onboard`" + `.
# Every key is documented in config.example.yaml; loading, environment
# overrides (NANOBOT_SECTION_KEY) and ${VAR} references are explained in
# docs/configuration.md. Keys left out keep their defaults.

agents:
  workspace: %s
  # provider/model, or a name under routes:
  model: openai/gpt-4o-mini

providers:
  openai:
    # Read from the environment when nanobot starts: export OPENAI_API_KEY=...
    api_key: ${OPENAI_API_KEY}
    # Any OpenAI-compatible endpoint works here (OpenRouter, Ollama, vLLM).
    base_url: https://api.openai.com/v1

%s`

// StarterYAML is the short, commented configuration `nanobot onboard` writes:
// the workspace, one model, the OpenAI provider with its key read from
// ${OPENAI_API_KEY}, and each chat channel of sections (the channel table)
// disabled. It passes Load and Validate once OPENAI_API_KEY is set.
func StarterYAML(workspace string, sections ...ChannelSection) []byte {
	return fmt.Appendf(nil, starterTemplate, yamlScalar(workspace), starterChannels(sections))
}

// starterChannels is the channels block of the starter: each section with
// enabled, its credential and allow_from, as the first steps need them.
func starterChannels(sections []ChannelSection) string {
	if len(sections) == 0 {
		return ""
	}
	var b strings.Builder
	first := sections[0]
	example := first.TokenKey + ": ${" + strings.ToUpper(first.Name) + "_BOT_TOKEN}"
	fmt.Fprintf(&b, "channels:\n"+
		"  # To chat from a chat channel: set enabled: true, give the bot token\n"+
		"  # (%s) and list the user ids allowed to talk to it\n"+
		"  # in allow_from (the bot answers /whoami with yours). See docs/configuration.md.\n", example)
	for _, s := range sections {
		fmt.Fprintf(&b, "  %s:\n    enabled: false\n", s.Name)
		if s.TokenKey != "" {
			fmt.Fprintf(&b, "    %s: \"\"\n", s.TokenKey)
		}
		b.WriteString("    allow_from: []\n")
	}
	return b.String()
}

// yamlScalar writes s as a YAML scalar, quoted only when it must be, with
// "${" escaped so that a path is never read as a variable reference.
func yamlScalar(s string) string {
	out, err := yaml.Marshal(strings.ReplaceAll(s, "${", "$${"))
	if err != nil { // a string always marshals; keep the file valid regardless
		return `""`
	}
	return string(bytes.TrimSpace(out))
}

// WriteStarter writes data to path with mode 0600 (it holds secrets, or will),
// creating its directory with mode 0700. It never overwrites: when path
// exists the error matches errors.Is(err, fs.ErrExist) and the file is left
// alone.
func WriteStarter(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write config %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("write config %s: %w", path, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// A half-written config would block the next onboard; remove it.
		return errors.Join(fmt.Errorf("write config %s: %w", path, err), os.Remove(path))
	}
	return nil
}

// CheckPermissions returns an error when the config file can be read or
// written by anyone but its owner. The file holds API keys and bot tokens, so
// the daemon logs this as a warning. On Windows, where modes do not describe
// access, it only checks that the file exists.
func CheckPermissions(path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	if runtime.GOOS == "windows" {
		return nil
	}
	if mode := info.Mode().Perm(); mode&0o066 != 0 {
		return fmt.Errorf("config %s has mode %04o: other users can read or change its secrets (run chmod 600 %s)",
			path, mode, path)
	}
	return nil
}
