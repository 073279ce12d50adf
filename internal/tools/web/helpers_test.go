package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sync"
	"testing"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/tools"
)

// TestMain fails the tests if a connection goroutine outlives them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeResolver answers from a table the test controls: each lookup of a
// host returns its next answer (the last one repeats), so a test can make
// a name change its address between two connections (DNS rebinding).
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][][]netip.Addr
	lookups map[string]int
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	answers, ok := r.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	if r.lookups == nil {
		r.lookups = map[string]int{}
	}
	i := min(r.lookups[host], len(answers)-1)
	r.lookups[host]++
	return answers[i], nil
}

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

// site is a test web server reachable by web_fetch under the names the
// resolver maps to it. Only its exact address and port are exempt from the
// guard: every other loopback or private address stays refused, so a
// refused test never connects anywhere.
type site struct {
	srv      *httptest.Server
	addr     netip.AddrPort
	resolver *fakeResolver
	fetch    *Fetch
}

func newSite(t *testing.T, cfg FetchConfig, handler http.Handler) *site {
	t.Helper()
	s := &site{srv: httptest.NewServer(handler)}
	t.Cleanup(s.srv.Close)
	u, _ := url.Parse(s.srv.URL)
	s.addr = netip.MustParseAddrPort(u.Host)
	ip := s.addr.Addr().String()
	s.resolver = &fakeResolver{answers: map[string][][]netip.Addr{
		"example.test":  {addrs(ip)},
		"internal.test": {addrs("10.0.0.5")},
		"mixed.test":    {addrs("10.0.0.9", ip)},
		"rebind.test":   {addrs(ip), addrs("10.0.0.7")},
		"metadata.test": {addrs("169.254.169.254")},
	}}
	cfg.Resolver = s.resolver
	if cfg.MaxBytes == 0 { // the default of config, as the daemon passes it
		cfg.MaxBytes = config.Defaults().Tools.Web.FetchMaxBytes
	}
	s.fetch = NewFetch(cfg, zaptest.NewLogger(t))
	s.fetch.guard.exempt = func(ap netip.AddrPort) bool { return ap == s.addr }
	t.Cleanup(s.fetch.CloseIdleConnections)
	return s
}

// url is an address of the site under a name, e.g. url("example.test", "/a").
func (s *site) url(host, path string) string {
	return fmt.Sprintf("http://%s:%d%s", host, s.addr.Port(), path)
}

// run calls a tool the way the registry does and returns the result, an
// error becoming an error result with its text.
func run(t *testing.T, tool tools.Tool, args any) tools.Result {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tool.Run(context.Background(), tools.Invocation{CallID: "c1", Args: raw})
	if err != nil {
		return tools.Result{Text: "Error: " + err.Error(), IsError: true}
	}
	return res
}
