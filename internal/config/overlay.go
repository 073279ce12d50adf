package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// SecretsFile is the secrets overlay in the data dir (the config file's
// directory): the keys and tokens pasted on the web page's setup view or
// given to `nanobot onboard`, kept 0600 outside the workspace. Load lays it
// over the config file, so a key there wins over the file's ${VAR}
// reference; a NANOBOT_* environment variable still wins over both.
const SecretsFile = "secrets.yaml"

// overlayKeyAllowed says which keys the overlay may set: a provider's
// api_key and a channel's secret-looking key (its bot token), which the
// channel's section then decodes like any. Anything else in it is an error
// (it is written by the daemon, not by hand).
func overlayKeyAllowed(key string) bool {
	parts := strings.Split(key, ".")
	switch {
	case len(parts) == 3 && parts[0] == "providers" && parts[2] == "api_key":
		return entryName.MatchString(parts[1])
	case len(parts) == 3 && parts[0] == "channels":
		return entryName.MatchString(parts[1]) && looksLikeCredential(parts[2])
	}
	return false
}

// ReadOverlay reads the secrets overlay at path into a flat map of key →
// value; a missing file is an empty overlay.
func ReadOverlay(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("secrets %s: %w", path, err)
	}
	var tree map[string]any
	if err := yaml.Unmarshal(data, &tree); err != nil {
		return nil, fmt.Errorf("secrets %s: %w (move it away; the web page or `nanobot onboard` writes a new one)", path, err)
	}
	out := map[string]string{}
	var errs []error
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := normalize(v).(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				walk(joinPath(prefix, k), x[k])
			}
		case string:
			if !overlayKeyAllowed(prefix) {
				errs = append(errs, fmt.Errorf("%s: not a key the secrets file may set (only providers.<name>.api_key and channels.<name>.token)", prefix))
				return
			}
			out[prefix] = x
		default:
			errs = append(errs, fmt.Errorf("%s: must be a string", prefix))
		}
	}
	walk("", tree)
	if len(errs) > 0 {
		return nil, problems("secrets "+path, errs)
	}
	return out, nil
}

// WriteOverlayData renders a flat overlay as YAML.
func WriteOverlayData(secrets map[string]string) ([]byte, error) {
	tree := map[string]any{}
	for _, key := range slices.Sorted(maps.Keys(secrets)) {
		if !overlayKeyAllowed(key) {
			return nil, fmt.Errorf("secrets: %s is not a key the secrets file may set", key)
		}
		parts := strings.Split(key, ".")
		node := tree
		for _, p := range parts[:len(parts)-1] {
			next, ok := node[p].(map[string]any)
			if !ok {
				next = map[string]any{}
				node[p] = next
			}
			node = next
		}
		node[parts[len(parts)-1]] = secrets[key]
	}
	body, err := yaml.Marshal(tree)
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	return append([]byte("# Written by nanobot (web setup view or onboard): secrets laid over config.yaml.\n"+
		"# Keep it 0600 and out of backups you share. Delete a line to fall back to config.yaml.\n"), body...), nil
}

// applyOverlay lays the overlay of the config's directory over raw: each
// secret replaces what the file wrote at its key (a ${VAR} reference,
// usually). The values are literal: no ${} expansion ("$${" keeps a "${").
func applyOverlay(raw map[string]any, dir string) error {
	secrets, err := ReadOverlay(filepath.Join(dir, SecretsFile))
	if err != nil {
		return err
	}
	for key, val := range secrets {
		parts := strings.Split(key, ".")
		node := raw
		for _, p := range parts[:len(parts)-1] {
			next, ok := node[p].(map[string]any)
			if !ok {
				next = map[string]any{}
				node[p] = next
			}
			node = next
		}
		node[parts[len(parts)-1]] = strings.ReplaceAll(val, "${", "$${")
	}
	return nil
}
