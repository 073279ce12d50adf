package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/sync/errgroup"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
)

// The web scenario measures the browser page (docs/web.md): how soon the
// model's first token shows in a real page, what 100 browser-like clients
// cost the gateway per turn (all watching one conversation: fan-out; each
// chatting in its own at once: concurrency), and what the page weighs.

// webToken is the login token of the bench's gateways.
const webToken = "nanobot-bench-web-token-0123456789"

// webChunkDelay paces the streamed reply of the CPU runs: 30 chunks take
// 300 ms, so each turn streams a couple of drafts before its final.
const webChunkDelay = 10 * time.Millisecond

// webResult is one run of the web scenario.
type webResult struct {
	// FirstVisible is, per turn, the model's first token → the first
	// draft visible in the page (Chromium, loopback).
	FirstVisible latencies
	// Clients is how many extra clients streamed the conversation in the
	// second CPU phase; CPUAlone and CPUWatched are the gateway's CPU per
	// turn with one client and with Clients more.
	Clients              int
	Turns                int
	CPUAlone, CPUWatched time.Duration
	// CPUOne is the gateway's CPU per turn with one client chatting in its
	// own conversation (Turns turns), CPUMany with Clients clients chatting
	// at once, each in its own, ClientTurns turns each; ManyTurns counts the
	// turns that phase completed.
	ClientTurns     int
	CPUOne, CPUMany time.Duration
	ManyTurns       int
	// PageGzip is what a first load transfers (gzip): index.html and the
	// modules and style it loads; PanelGzip the panel's module, loaded
	// when it is opened.
	PageGzip, PanelGzip int64
}

func runWeb(ctx context.Context, o options) (webResult, error) {
	res := webResult{Clients: o.webClients, Turns: o.webTurns, ClientTurns: o.webClientTurns}
	// Every client's turn must be able to run at once: the default of four
	// model calls in flight would queue the concurrency phase, and measure
	// the queue instead of the gateway.
	s := setup{WebToken: webToken, MaxConcurrentTurns: max(o.webClients, 4)}
	err := withGateway(ctx, o, s, func(h *harness, _ ready) error {
		base := "http://" + h.listen
		var err error
		if res.PageGzip, res.PanelGzip, err = pageWeight(ctx, base); err != nil {
			return err
		}
		if res.FirstVisible, err = firstVisible(ctx, h, base, o.streamN); err != nil {
			return err
		}
		var prof *profiler
		if o.profileDir != "" {
			prof = &profiler{addr: o.pprofAddr, dir: o.profileDir}
		}
		if res.CPUAlone, res.CPUWatched, err = fanOutCPU(ctx, h, base, o.webTurns, o.webClients, prof); err != nil {
			return err
		}
		res.CPUOne, res.CPUMany, res.ManyTurns, err = concurrentCPU(ctx, h, base, o.webTurns, o.webClientTurns, o.webClients, prof)
		return err
	})
	return res, err
}

// pageWeight fetches the page and what it loads, as a browser would
// (gzip), and returns the bytes transferred.
func pageWeight(ctx context.Context, base string) (page, panel int64, err error) {
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	size := func(path string) (int64, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		req.Header.Set("Accept-Encoding", "gzip")
		resp, err := client.Do(req)
		if err != nil {
			return 0, fmt.Errorf("GET %s: %w", path, err)
		}
		defer resp.Body.Close()
		n, err := io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusOK || err != nil {
			return 0, fmt.Errorf("GET %s: %d %v", path, resp.StatusCode, err)
		}
		return n, nil
	}
	for _, p := range []string{"/", "/assets/style.css", "/assets/app.js", "/assets/api.js", "/assets/sanitize.js"} {
		n, err := size(p)
		if err != nil {
			return 0, 0, err
		}
		page += n
	}
	panel, err = size("/assets/panel.js")
	return page, panel, err
}

// webClient is a logged-in browser-like client.
type webClient struct {
	base, cookie, csrf string
	http               *http.Client
}

func login(ctx context.Context, base string) (*webClient, error) {
	c := &webClient{base: base, http: &http.Client{}}
	var out struct{ CSRF string }
	resp, err := c.do(ctx, "POST", "/api/login", map[string]string{"token": webToken}, &out)
	if err != nil {
		return nil, err
	}
	for _, ck := range resp.Cookies() {
		if ck.Name == "nanobot_session" {
			c.cookie = ck.Name + "=" + ck.Value
		}
	}
	c.csrf = out.CSRF
	if c.cookie == "" {
		return nil, errors.New("login set no session cookie")
	}
	return c, nil
}

// do sends in as JSON and decodes the answer into out; the response it
// returns has its body read and closed.
//
//bodyclose:handled
func (c *webClient) do(ctx context.Context, method, path string, in, out any) (*http.Response, error) {
	body, _ := json.Marshal(in)
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", c.csrf)
	if c.cookie != "" {
		req.Header.Set("Cookie", c.cookie)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return nil, fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	return resp, nil
}

// stream follows a conversation's events and sends each one's type on
// the returned channel (when it is not nil) until ctx ends.
func (c *webClient) stream(ctx context.Context, chat string, types chan<- string) (func(), error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/api/chats/"+chat+"/events", nil)
	req.Header.Set("Cookie", c.cookie)
	//lint:ignore bodyclose the reader goroutine closes it, and the stop func returned
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("events: %d", resp.StatusCode)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok || types == nil {
				continue
			}
			var ev struct{ Type string }
			if json.Unmarshal([]byte(line), &ev) == nil {
				select {
				case types <- ev.Type:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return func() { resp.Body.Close(); <-done }, nil
}

// fanOutCPU runs turns in one conversation watched by one client, then by
// one plus clients more, and returns the gateway's CPU per turn for each.
// With prof, each phase's CPU profile is written as web-<phase>-cpu.pprof.
func fanOutCPU(ctx context.Context, h *harness, base string, turns, clients int, prof *profiler) (alone, watched time.Duration, err error) {
	h.script.Func = func(fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Text: streamText, ChunkDelay: webChunkDelay}
	}
	c, err := login(ctx, base)
	if err != nil {
		return 0, 0, err
	}
	var chat struct{ ID string }
	if _, err := c.do(ctx, "POST", "/api/chats", map[string]string{}, &chat); err != nil {
		return 0, 0, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := make(chan string, 64)
	stop, err := c.stream(ctx, chat.ID, events)
	if err != nil {
		return 0, 0, err
	}
	defer stop()
	phase := func(name string) (time.Duration, error) {
		before, err := readCPU(h.pid())
		if err != nil {
			return 0, err
		}
		profiled := make(chan error, 1)
		if prof != nil {
			// A phase takes about 0.35 s a turn; the profile covers most of it.
			secs := max(turns*3/10, 1)
			go func() { profiled <- prof.fetch(ctx, fmt.Sprintf("profile?seconds=%d", secs), "web-"+name+"-cpu.pprof") }()
		} else {
			profiled <- nil
		}
		for n := range turns {
			if _, err := c.do(ctx, "POST", "/api/chats/"+chat.ID+"/messages", map[string]string{"text": fmt.Sprint(name, " turn ", n)}, nil); err != nil {
				return 0, err
			}
			if err := awaitFinal(ctx, h, events); err != nil {
				return 0, err
			}
		}
		after, err := readCPU(h.pid())
		if err != nil {
			return 0, err
		}
		return (after - before) / time.Duration(turns), <-profiled
	}
	if alone, err = phase("alone"); err != nil {
		return 0, 0, err
	}
	var wg sync.WaitGroup
	var stops []func()
	defer func() {
		for _, s := range stops {
			s()
		}
		wg.Wait()
	}()
	for range clients {
		s, err := c.stream(ctx, chat.ID, nil)
		if err != nil {
			return 0, 0, err
		}
		stops = append(stops, s)
	}
	watched, err = phase("watched")
	return alone, watched, err
}

// concurrentCPU runs closed loops (send a message, stream the reply over
// the conversation's own event stream until its final, send the next):
// one client in its own conversation for oneTurns turns, then clients
// clients at once, each in its own, for clientTurns turns each; it returns
// the gateway's CPU per completed turn of each phase and how many turns the
// second completed. The lone client runs as many turns as the fan-out
// phases because /proc counts CPU in 10 ms ticks: a few turns would be a
// few ticks. With prof, each phase's CPU profile is written as
// web-one-cpu.pprof and web-many-cpu.pprof.
func concurrentCPU(ctx context.Context, h *harness, base string, oneTurns, clientTurns, clients int, prof *profiler) (one, many time.Duration, manyTurns int, err error) {
	h.script.Func = func(fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Text: streamText, ChunkDelay: webChunkDelay}
	}
	// One login for all: the gateway rate-limits logins, and a session is
	// not what is measured.
	c, err := login(ctx, base)
	if err != nil {
		return 0, 0, 0, err
	}
	if one, _, err = chatLoops(ctx, h, c, "one", 1, oneTurns, prof); err != nil {
		return 0, 0, 0, err
	}
	many, manyTurns, err = chatLoops(ctx, h, c, "many", clients, clientTurns, prof)
	return one, many, manyTurns, err
}

// chatLoops opens n conversations, each with its own connections (as n
// browsers would have) and event stream, then runs turns turns in each at
// once and returns the gateway's CPU per completed turn. Setting up and
// tearing down the conversations and streams is outside the measurement.
func chatLoops(ctx context.Context, h *harness, login *webClient, name string, n, turns int, prof *profiler) (perTurn time.Duration, done int, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type loop struct {
		c      *webClient
		chat   string
		events chan string
	}
	loops := make([]loop, n)
	var stops []func()
	defer func() {
		// Cancelled first, so that no reader is left waiting to hand over
		// an event nobody will take.
		cancel()
		for _, stop := range stops {
			stop()
		}
		for _, l := range loops {
			if l.c != nil {
				l.c.http.CloseIdleConnections()
			}
		}
	}()
	for i := range loops {
		c := &webClient{base: login.base, cookie: login.cookie, csrf: login.csrf, http: &http.Client{Transport: &http.Transport{}}}
		var chat struct{ ID string }
		if _, err := c.do(ctx, "POST", "/api/chats", map[string]string{}, &chat); err != nil {
			return 0, 0, fmt.Errorf("client %d: %w", i, err)
		}
		events := make(chan string, 64)
		stop, err := c.stream(ctx, chat.ID, events)
		if err != nil {
			return 0, 0, fmt.Errorf("client %d: %w", i, err)
		}
		stops = append(stops, stop)
		loops[i] = loop{c: c, chat: chat.ID, events: events}
	}
	before, err := readCPU(h.pid())
	if err != nil {
		return 0, 0, err
	}
	profiled := make(chan error, 1)
	if prof != nil {
		// A turn takes about 0.35 s unhurried; a busy phase takes longer
		// and the profile then covers its start.
		secs := max(turns*3/10, 1)
		go func() { profiled <- prof.fetch(ctx, fmt.Sprintf("profile?seconds=%d", secs), "web-"+name+"-cpu.pprof") }()
	} else {
		profiled <- nil
	}
	var completed atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for i, l := range loops {
		g.Go(func() error {
			for t := range turns {
				text := fmt.Sprint(name, " client ", i, " turn ", t)
				if _, err := l.c.do(gctx, "POST", "/api/chats/"+l.chat+"/messages", map[string]string{"text": text}, nil); err != nil {
					return fmt.Errorf("client %d: %w", i, err)
				}
				if err := awaitFinal(gctx, h, l.events); err != nil {
					return fmt.Errorf("client %d turn %d: %w", i, t, err)
				}
				completed.Add(1)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, 0, err
	}
	after, err := readCPU(h.pid())
	if err != nil {
		return 0, 0, err
	}
	done = int(completed.Load())
	return (after - before) / time.Duration(max(done, 1)), done, <-profiled
}

func awaitFinal(ctx context.Context, h *harness, events <-chan string) error {
	timeout := time.NewTimer(60 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case t := <-events:
			if t == "final" {
				return nil
			}
		case <-timeout.C:
			return fmt.Errorf("no final answer within 60s (log: %s)", h.logf.Name())
		case <-h.exited:
			return h.exitError()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// firstVisible drives a headless Chromium: it logs in and sends n
// messages; for each, the page records (MutationObserver) when the first
// draft's text appears, and the fake model when it wrote the first token.
func firstVisible(ctx context.Context, h *harness, base string, n int) (latencies, error) {
	// The model's stream is held after its first token until the page
	// shows it, so the first draft cannot wait for the end of the stream
	// however slow the machine.
	var firstToken, holds sync.Map // turn text → time, and → chan struct{}
	h.script.Func = func(r fakellm.Request) fakellm.Reply {
		text := lastLine(r.LastUserText())
		firstToken.Store(text, time.Now())
		hold, _ := holds.Load(text)
		ch, _ := hold.(chan struct{})
		return fakellm.Reply{Text: streamText, ChunkDelay: streamChunkDelay, HoldAfterFirst: ch}
	}
	path, err := findBrowser()
	if err != nil {
		return latencies{}, err
	}
	dir, err := os.MkdirTemp("", "nanobot-bench-chromium-")
	if err != nil {
		return latencies{}, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.Headless,
		chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true), chromedp.UserDataDir(dir))
	defer cancelAlloc()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	poll := func(expr string) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(5*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second))
	}
	if err := chromedp.Do(bctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS("#login-token")),
		chromedp.SendKeys(chromedp.CSS("#login-token"), webToken),
		chromedp.Click(chromedp.CSS("#login-form button")),
		chromedp.WaitVisible(chromedp.CSS("#input")),
		poll(`document.querySelector('#transcript').dataset.ready === '1'`),
	); err != nil {
		return latencies{}, fmt.Errorf("browser login: %w", err)
	}
	// The observer stamps the first draft text of each turn with the
	// wall clock (the fake's clock too: same machine).
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`(() => { window.seen = null;
		new MutationObserver(() => { if (window.seen === null) { const d = document.querySelector('#transcript .msg.draft');
			if (d && d.textContent) window.seen = performance.timeOrigin + performance.now(); } })
		.observe(document.querySelector('#transcript'), {subtree: true, childList: true, characterData: true}); return true })()`)); err != nil {
		return latencies{}, fmt.Errorf("browser observer: %w", err)
	}
	var samples []time.Duration
	for i := range n {
		text := fmt.Sprint("visible ", i)
		hold := make(chan struct{})
		release := sync.OnceFunc(func() { close(hold) })
		holds.Store(text, hold)
		err := chromedp.Do(bctx,
			chromedp.Evaluate[chromedp.Void](`window.seen = null`),
			chromedp.SendKeys(chromedp.CSS("#input"), text),
			chromedp.Click(chromedp.CSS("#send")),
			poll(`window.seen !== null`),
		)
		release()
		if err == nil {
			err = chromedp.Do(bctx, poll(`!document.querySelector('#transcript .msg.draft')`))
		}
		if err != nil {
			return latencies{}, fmt.Errorf("turn %d: %w", i, err)
		}
		seen, err := chromedp.Run(bctx, chromedp.Evaluate[float64](`window.seen`))
		if err != nil {
			return latencies{}, err
		}
		ft, ok := firstToken.Load(text)
		if !ok {
			return latencies{}, fmt.Errorf("turn %d: the model was not asked %q", i, text)
		}
		shown := time.UnixMicro(int64(seen * 1000))
		samples = append(samples, shown.Sub(ft.(time.Time)))
	}
	return summarise(samples), nil
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// findBrowser returns a headless Chromium's path.
func findBrowser() (string, error) {
	for _, n := range []string{"chromium-headless-shell", "chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no headless Chromium found: apt-get install -y chromium-headless-shell")
}
