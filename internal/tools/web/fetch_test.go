package web

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/testkit/golden"
)

// pages serves the fixtures the fetch tests need.
func pages(t *testing.T) http.Handler {
	t.Helper()
	article, err := os.ReadFile(filepath.Join("testdata", "article.html"))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/article", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(article)
	})
	mux.HandleFunc("/text", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(strings.Repeat("0123456789", 3)))
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(strings.Repeat("x", 10_000)))
	})
	mux.HandleFunc("/latin1", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=iso-8859-1")
		_, _ = w.Write([]byte("<html><head><title>Caf\xe9</title></head><body><p>Un caf\xe9 cr\xe8me, s'il vous pla\xeet.</p></body></html>"))
	})
	mux.HandleFunc("/png", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write([]byte("\x89PNG\r\n\x1a\n...."))
	})
	mux.HandleFunc("/missing", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte("<html><body><h1>Not found</h1></body></html>"))
	})
	// /to?u=URL redirects there; /hop/N redirects N more times, then lands.
	mux.HandleFunc("/to", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("u"), http.StatusFound)
	})
	mux.HandleFunc("/hop/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		if n == 0 {
			_, _ = w.Write([]byte("landed"))
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/hop/%d", n-1), http.StatusFound)
	})
	// /close answers on a connection that is then closed, so the next
	// request to the same name dials (and resolves) again.
	mux.HandleFunc("/close", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Connection", "close")
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("first connection"))
	})
	return mux
}

func TestFetchRefusesNonPublicDestinations(t *testing.T) {
	s := newSite(t, FetchConfig{}, pages(t))
	tests := []struct {
		name string
		url  string
		want string
	}{
		{"loopback", "http://127.0.0.1/", "refused: 127.0.0.1 is a loopback address"},
		{"loopback with port", "http://127.0.0.1:8080/admin", "refused: 127.0.0.1 is a loopback address"},
		{"ipv6 loopback", "http://[::1]/", "refused: ::1 is a loopback address"},
		{"cloud metadata", "http://169.254.169.254/latest/meta-data/", "refused: 169.254.169.254 is a cloud metadata address"},
		{"private", "http://192.168.1.1/", "refused: 192.168.1.1 is a private address"},
		{"cgnat", "http://100.64.1.1/", "refused: 100.64.1.1 is a carrier-grade NAT (shared) address"},
		{"name resolving to a private address", "http://internal.test/", "refused: internal.test resolves to 10.0.0.5, a private address"},
		{"name resolving to metadata", "http://metadata.test/", "metadata.test resolves to 169.254.169.254, a cloud metadata address"},
		{"redirect to a private address", s.url("example.test", "/to?u=http://10.0.0.5/admin"), "refused: 10.0.0.5 is a private address"},
		{"redirect to metadata", s.url("example.test", "/to?u=http://169.254.169.254/latest/"), "169.254.169.254 is a cloud metadata address"},
		{"redirect to a private name", s.url("example.test", "/to?u=http://internal.test:8080/"), "internal.test resolves to 10.0.0.5"},
		{"redirect to file", s.url("example.test", "/to?u=file:///etc/passwd"), "redirect to a file URL refused"},
		{"file", "file:///etc/passwd", `only http and https URLs can be fetched, not "file:///etc/passwd"`},
		{"ftp", "ftp://ftp.example.com/x", "only http and https URLs"},
		{"no host", "http:///path", "has no host"},
		{"unknown name", "http://nowhere.test/", "no such host"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, s.fetch, map[string]any{"url": tc.url})
			if !res.IsError || !strings.Contains(res.Text, tc.want) {
				t.Errorf("result = %+v, want an error containing %q", res, tc.want)
			}
		})
	}
}

// Every connection is checked at dial time with the address just resolved,
// so a name that resolves to a public address first and to a private one
// on the next lookup (DNS rebinding) is refused the second time.
func TestFetchChecksEveryConnectionAgainstRebinding(t *testing.T) {
	s := newSite(t, FetchConfig{}, pages(t))
	first := run(t, s.fetch, map[string]any{"url": s.url("rebind.test", "/close")})
	if first.IsError || !strings.Contains(first.Text, "first connection") {
		t.Fatalf("first fetch = %+v", first)
	}
	second := run(t, s.fetch, map[string]any{"url": s.url("rebind.test", "/close")})
	if !second.IsError || !strings.Contains(second.Text, "rebind.test resolves to 10.0.0.7, a private address") {
		t.Errorf("second fetch = %+v", second)
	}
}

func TestFetchSkipsPrivateAddressesOfAMixedName(t *testing.T) {
	s := newSite(t, FetchConfig{}, pages(t))
	res := run(t, s.fetch, map[string]any{"url": s.url("mixed.test", "/text")})
	if res.IsError || !strings.Contains(res.Text, "0123456789") {
		t.Errorf("result = %+v", res)
	}
}

func TestFetchFollowsAtMostFiveRedirects(t *testing.T) {
	s := newSite(t, FetchConfig{}, pages(t))
	ok := run(t, s.fetch, map[string]any{"url": s.url("example.test", "/hop/5")})
	if ok.IsError || !strings.Contains(ok.Text, "landed") || !strings.Contains(ok.Text, "URL: "+s.url("example.test", "/hop/0")) ||
		!strings.Contains(ok.Text, "Redirected from: "+s.url("example.test", "/hop/5")) {
		t.Errorf("five redirects: %+v", ok)
	}
	tooMany := run(t, s.fetch, map[string]any{"url": s.url("example.test", "/hop/6")})
	if !tooMany.IsError || !strings.Contains(tooMany.Text, "stopped after 5 redirects") {
		t.Errorf("six redirects: %+v", tooMany)
	}
}

func TestFetchCapsTheResponse(t *testing.T) {
	s := newSite(t, FetchConfig{MaxBytes: 4096}, pages(t))
	res := run(t, s.fetch, map[string]any{"url": s.url("example.test", "/big")})
	if res.IsError || !strings.Contains(res.Text, "Note: only the first 4096 bytes of the response were read.") {
		t.Fatalf("result = %+v", res)
	}
	if !strings.Contains(res.Text, "\n"+strings.Repeat("x", 4096)) || strings.Contains(res.Text, strings.Repeat("x", 4097)) {
		t.Errorf("the body kept is not exactly 4096 bytes:\n%s", res.Text)
	}
}

func TestFetchPagesThroughLongText(t *testing.T) {
	s := newSite(t, FetchConfig{MaxChars: 12}, pages(t))
	tests := []struct {
		start int
		want  []string
	}{
		{0, []string{"Characters 0-12 of 30. Call web_fetch again with start_char=12 for more.", "\n012345678901"}},
		{24, []string{"Characters 24-30 of 30.\n", "\n456789"}},
		{30, []string{"the text has 30 characters; start_char 30 is past its end"}},
	}
	for _, tc := range tests {
		res := run(t, s.fetch, map[string]any{"url": s.url("example.test", "/text"), "start_char": tc.start})
		for _, want := range tc.want {
			if res.IsError || !strings.Contains(res.Text, want) {
				t.Errorf("start_char %d: result %q lacks %q", tc.start, res.Text, want)
			}
		}
	}
}

func TestFetchContentTypes(t *testing.T) {
	s := newSite(t, FetchConfig{}, pages(t))
	tests := []struct {
		path    string
		isError bool
		want    []string
	}{
		{"/latin1", false, []string{"Title: Café", "Un café crème, s'il vous plaît."}},
		{"/png", true, []string{"is image/png (12 bytes), not a page or text"}},
		{"/missing", true, []string{"Status: 404 Not Found", "Not found"}},
	}
	for _, tc := range tests {
		res := run(t, s.fetch, map[string]any{"url": s.url("example.test", tc.path)})
		for _, want := range tc.want {
			if res.IsError != tc.isError || !strings.Contains(res.Text, want) {
				t.Errorf("%s: result %+v, want is_error=%v and %q", tc.path, res, tc.isError, want)
			}
		}
	}
}

// The article page becomes Markdown of its main content: headings,
// emphasis, absolute links, the table and the list kept; navigation,
// cookie banner, sidebar, footer and scripts dropped. The golden file
// shows the whole result (go test -run TestFetchHTMLToMarkdown -update).
func TestFetchHTMLToMarkdown(t *testing.T) {
	s := newSite(t, FetchConfig{}, pages(t))
	res := run(t, s.fetch, map[string]any{"url": s.url("example.test", "/article")})
	if res.IsError {
		t.Fatalf("result = %+v", res)
	}
	// The port changes between runs; the golden file has PORT.
	got := strings.ReplaceAll(res.Text, strconv.Itoa(int(s.addr.Port())), "PORT")
	golden.Check(t, filepath.Join("testdata", "article.golden.md"), []byte(got))
	for _, want := range []string{"Title: Watering Plants in Winter", "**much less water**",
		"[humidity guide](http://example.test:PORT/guides/humidity)", "| Cactus | 4 weeks |", "- Use water at room temperature."} {
		if !strings.Contains(got, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	for _, junk := range []string{"tracking-code-xyz", "footer-script-abc", "font-family", "Log in", "Accept all", "Popular posts", "Privacy"} {
		if strings.Contains(got, junk) {
			t.Errorf("markdown keeps page clutter %q", junk)
		}
	}

	full := run(t, s.fetch, map[string]any{"url": s.url("example.test", "/article"), "full_page": true})
	if !strings.Contains(full.Text, "Log in") || !strings.Contains(full.Text, "Popular posts") || strings.Contains(full.Text, "tracking-code-xyz") {
		t.Errorf("full_page should keep navigation and sidebar but never scripts:\n%s", full.Text)
	}
}
