package openai_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/openaifake"
)

func TestModels(t *testing.T) {
	fake := openaifake.New(t, nil, openaifake.WithModels("gpt-4o-mini", "gpt-4.1"))
	ids, err := newProvider(t, fake, nil).Models(context.Background())
	if err != nil || !slices.Equal(ids, []string{"gpt-4o-mini", "gpt-4.1"}) {
		t.Fatalf("Models = %v, %v", ids, err)
	}

	_, err = newProvider(t, fake, func(c *config.ProviderConfig) { c.APIKey = "sk-wrong-key-0123456789" }).Models(context.Background())
	var api *llm.APIError
	if !errors.As(err, &api) || !api.Auth() {
		t.Fatalf("wrong key: err = %v, want an auth APIError", err)
	}
	if msg := err.Error(); msg == "" || strings.Contains(msg, "sk-wrong-key-0123456789") {
		t.Errorf("error echoes the key: %q", msg)
	}

	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err = newRawProvider(t, url+"/v1").Models(context.Background())
	if !errors.As(err, &api) || !api.Retryable() || api.Status != 0 {
		t.Errorf("unreachable server: err = %v, want a retryable transport APIError", err)
	}
}
