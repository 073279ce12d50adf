package fakes_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes"
)

func TestOutageCutsTheLinkAndRestoresItOnTheSameAddress(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "pong") }))
	defer srv.Close()
	link := fakes.NewOutage(t, srv.URL)
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	get := func() (string, error) {
		resp, err := client.Get(link.URL())
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}

	if body, err := get(); err != nil || body != "pong" {
		t.Fatalf("through the link: %q, %v", body, err)
	}
	link.Down()
	if body, err := get(); err == nil {
		t.Fatalf("link down, yet the request got %q", body)
	}
	link.Up()
	if body, err := get(); err != nil || body != "pong" {
		t.Fatalf("link up again: %q, %v", body, err)
	}
}
