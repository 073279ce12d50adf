package fakes

import (
	"io"
	"net/http"
	"net/http/httptest"
)

// Replay serves body as an event stream to every request, after reading the
// request, and returns its URL and a client with a connection pool of its
// own. A benchmark that streams a recorded answer through an adapter then
// counts only the client side's work (adapter and net/http).
func Replay(tb TB, body []byte) (url string, client *http.Client) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(body)
	}))
	tb.Cleanup(srv.Close)
	client = &http.Client{Transport: &http.Transport{}}
	tb.Cleanup(client.CloseIdleConnections)
	return srv.URL, client
}
