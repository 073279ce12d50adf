package daemon

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// TestModelClientKeepsAConnectionPerCall runs rounds of as many concurrent
// calls as there are slots: each slot must reuse its connection, so the
// server sees about one connection per slot in all, not new ones each round
// (with http.DefaultTransport's two idle connections per host it sees about
// slots-2 more every round).
func TestModelClientKeepsAConnectionPerCall(t *testing.T) {
	const slots, rounds = 20, 5
	var conns atomic.Int64
	// Every call of a round is held until all of them arrived, so the round
	// really has slots connections in use at once, and then all end together.
	var (
		arrived sync.WaitGroup
		mu      sync.Mutex
		release chan struct{} // closed when the round's calls may end
	)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		rel := release
		mu.Unlock()
		arrived.Done()
		<-rel
		_, _ = io.WriteString(w, `data: {"choices":[]}`+"\n\ndata: [DONE]\n\n")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)

	hc := modelClient(slots)
	body := strings.Repeat("x", 28<<10) // the size of a turn's request
	for round := range rounds {
		arrived.Add(slots)
		rel := make(chan struct{})
		mu.Lock()
		release = rel
		mu.Unlock()
		errs := make(chan error, slots)
		var done sync.WaitGroup
		for range slots {
			done.Go(func() { errs <- call(hc, srv.URL, body) })
		}
		arrived.Wait()
		close(rel)
		done.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
	// A little slack: a connection can come back to the pool just after
	// the next round's call dialled.
	if got, most := conns.Load(), int64(slots+2); got > most {
		t.Errorf("%d calls in %d rounds of %d opened %d connections, want at most %d", slots*rounds, rounds, slots, got, most)
	}
}

// call posts body and reads the answer to the end, as a provider does, so
// that the connection can go back to the pool.
func call(hc *http.Client, url, body string) error {
	resp, err := hc.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}
