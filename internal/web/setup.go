package web

import (
	"context"
	"net/http"
	"time"

	"go.uber.org/zap"
)

// Setup is the first-run setup the page offers while a model key is
// missing (docs/web.md#setup): pick a provider, paste its key (and, if
// wanted, a Telegram or Discord bot token), test it live, save it. The
// daemon implements it: it keeps the secrets outside the workspace and puts
// the new key in place without a restart. Secrets go in, never out: State
// says what is missing, never what is set.
type Setup interface {
	// State says what is missing and what can be set.
	State() SetupState
	// Test checks in with one cheap call (the provider's model list,
	// Telegram getMe, Discord users/@me) and says what it found; the error
	// says why not, in words for the person at the page.
	Test(ctx context.Context, in SetupInput) (string, error)
	// Save tests in, stores what it holds and applies it.
	Save(ctx context.Context, in SetupInput) (SaveResult, error)
}

// SetupState is GET /api/setup.
type SetupState struct {
	// Needed is true while a provider in use has no key: the page opens on
	// the setup view.
	Needed    bool            `json:"needed"`
	Providers []SetupProvider `json:"providers"`
	Channels  []SetupChannel  `json:"channels"`
}

// SetupProvider is one configured provider.
type SetupProvider struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// InUse: agents.model (or a fallback or route) uses it.
	InUse bool `json:"in_use"`
	// Problem says what is wrong ("" when nothing is known).
	Problem string `json:"problem,omitempty"`
	// KeyVar is the environment variable its key is read from, if any.
	KeyVar string `json:"key_var,omitempty"`
}

// SetupChannel is a chat channel that takes a bot token.
type SetupChannel struct {
	Name    string `json:"name"`
	Enabled bool   `json:"enabled"`
	Problem string `json:"problem,omitempty"`
}

// SetupInput is what the page sends to test or save: a provider's key, a
// bot token, or both.
type SetupInput struct {
	Provider string `json:"provider,omitempty"`
	Key      string `json:"key,omitempty"`
	// Channel is a chat channel of Status.Channels, with Token its bot token.
	Channel string `json:"channel,omitempty"`
	Token   string `json:"token,omitempty"`
}

// SaveResult says what a save did.
type SaveResult struct {
	// Applied: the daemon uses it now. Restart: it is used from the next
	// start (a bot token of a channel that is not enabled, or in
	// Telegram's webhook mode).
	Applied []string `json:"applied"`
	Restart []string `json:"restart,omitempty"`
	// File is where the secrets were written.
	File string `json:"file"`
}

// setupTimeout bounds a live test: a provider or platform slower than
// this is as good as unreachable.
const setupTimeout = 20 * time.Second

// setupRoutes mounts the setup API (behind the login and CSRF rules of
// every API route).
func (s *Server) setupRoutes(api func(string, http.HandlerFunc)) {
	st := s.deps.Setup
	api("GET /api/setup", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, st.State())
	})
	api("POST /api/setup/test", func(w http.ResponseWriter, r *http.Request) {
		var in SetupInput
		if !decodeJSON(w, r, &in, 16<<10) {
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), setupTimeout)
		defer cancel()
		found, err := st.Test(ctx, in)
		if err != nil {
			writeJSON(w, http.StatusOK, map[string]any{"ok": false, "error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "detail": found})
	})
	api("POST /api/setup/save", func(w http.ResponseWriter, r *http.Request) {
		var in SetupInput
		if !decodeJSON(w, r, &in, 16<<10) {
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), setupTimeout)
		defer cancel()
		res, err := st.Save(ctx, in)
		if err != nil {
			writeError(w, http.StatusUnprocessableEntity, err.Error())
			return
		}
		s.log.Info("setup saved from the web page", zap.Strings("applied", res.Applied), zap.Strings("at_restart", res.Restart))
		writeJSON(w, http.StatusOK, res)
	})
}
