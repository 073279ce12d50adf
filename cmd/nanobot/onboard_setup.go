package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nanobot-go/nanobot/internal/daemon"
)

// promptSetup is onboard's interactive part, run when stdin is a terminal
// (the same as the web page's setup view, docs/web.md#setup): it asks for
// the provider and its key, tests the key with one cheap call, and saves it
// to the secrets overlay in the data dir (mode 0600). An empty answer skips
// a step; the page can take the key later. Optionally the same for a bot
// token.
func promptSetup(ctx context.Context, in io.Reader, out io.Writer, path string) error {
	cfg, err := daemon.LoadConfig(path)
	if err != nil {
		return err
	}
	data := filepath.Dir(path)
	sc := bufio.NewScanner(in)
	ask := func(q string) string {
		fmt.Fprint(out, q)
		if !sc.Scan() {
			return ""
		}
		return strings.TrimSpace(sc.Text())
	}
	names := make([]string, 0, len(cfg.Providers))
	for name := range cfg.Providers {
		names = append(names, name)
	}
	slices.Sort(names)
	def := "openai"
	if used := cfg.UsedProviders(); len(used) > 0 {
		def = used[0]
	}
	if cfg.ProviderProblem(def) == "" {
		fmt.Fprintf(out, "\nproviders.%s has a key already; the web page's setup view can replace it.\n", def)
	} else {
		for {
			name := ask(fmt.Sprintf("\nModel provider (%s) [%s]: ", strings.Join(names, ", "), def))
			if name == "" {
				name = def
			}
			key := ask("API key for " + name + " (empty: skip, paste it on the web page later): ")
			if key == "" {
				break
			}
			found, err := daemon.TestSetup(ctx, cfg, data, daemon.SetupInput{Provider: name, Key: key})
			if err != nil {
				fmt.Fprintf(out, "  not saved: %v\n", err)
				continue
			}
			file, err := daemon.SaveSecrets(data, map[string]string{"providers." + name + ".api_key": key})
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "  %s; saved to %s (mode 0600)\n", found, file)
			if !slices.Contains(cfg.UsedProviders(), name) {
				fmt.Fprintf(out, "  agents.model uses %s: set it to %s/<model> in %s to use this key\n", cfg.Agents.Model, name, path)
			}
			break
		}
	}
	for {
		names := daemon.ChannelNames()
		ch := ask("\nBot token for " + strings.Join(names, " or ") + "? (" + strings.Join(names, ", ") + ", empty: none): ")
		if ch == "" {
			return nil
		}
		tok := ask("Token for " + ch + ": ")
		found, err := daemon.TestSetup(ctx, cfg, data, daemon.SetupInput{Channel: ch, Token: tok})
		if err != nil {
			fmt.Fprintf(out, "  not saved: %v\n", err)
			continue
		}
		file, err := daemon.SaveSecrets(data, map[string]string{daemon.ChannelTokenKey(ch): tok})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "  %s; saved to %s (mode 0600). Enable it in %s (channels.%s.enabled: true, allow_from).\n", found, file, path, ch)
	}
}
