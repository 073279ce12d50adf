package daemon

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/web"
)

// The web page, end to end in a real headless Chromium: the real gateway
// (agent, sessions, channel manager, web server) and the fake model behind
// the OpenAI adapter. A machine without a browser fails this test; the
// message says how to install one.

// browserNames are the executables tried, in order.
var browserNames = []string{"chromium-headless-shell", "chromium", "chromium-browser", "google-chrome", "headless_shell"}

func findBrowser(t *testing.T) string {
	t.Helper()
	for _, n := range browserNames {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	for _, p := range []string{"/usr/lib/chromium-headless-shell/chromium-headless-shell", "/usr/lib/chromium/chromium"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatalf("no headless Chromium found (tried %s): install one with "+
		"`apt-get install -y chromium-headless-shell` (or `apt-get install -y chromium`), or run ./scripts/test, which does",
		strings.Join(browserNames, ", "))
	return ""
}

// browser is one headless Chromium with a fresh profile, driven by chromedp.
type browser struct {
	t   *testing.T
	ctx context.Context
	// shots is where screenshots go: $NANOBOT_SCREENSHOTS, or the test's
	// artifact directory.
	shots string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := findBrowser(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The first Run starts the browser; it must not carry a timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	shots := os.Getenv("NANOBOT_SCREENSHOTS")
	if shots == "" {
		shots = t.ArtifactDir()
	}
	return &browser{t: t, ctx: ctx, shots: shots}
}

// do runs steps, failing the test after 30 s.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// eval returns the value of a JavaScript expression.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// until polls a JavaScript predicate in the page until it is true.
func (b *browser) until(what, predicate string) {
	b.t.Helper()
	b.do("waiting for "+what, chromedp.Steps(
		func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
			_, err := chromedp.Poll[chromedp.Void](predicate, chromedp.WithPollingInterval(20*time.Millisecond),
				chromedp.WithPollingTimeout(25*time.Second))(ctx, t)
			return chromedp.Void{}, err
		}))
}

func (b *browser) screenshot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(b.shots, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s", path)
}

// send types text into the composer and sends it.
func (b *browser) send(text string) {
	b.t.Helper()
	b.do("send "+text,
		chromedp.SendKeys(chromedp.CSS("#input"), text),
		chromedp.Click(chromedp.CSS("#send")))
}

// lastAssistant is the text of the last answer bubble.
const lastAssistant = `(() => { const m = document.querySelectorAll('#transcript .msg.assistant'); return m.length ? m[m.length-1].textContent : '' })()`

func webToken(g *gw) string {
	g.t.Helper()
	path := filepath.Join(g.home, WebTokenFile)
	g.waitUntil("the web token file", func() bool { _, err := os.Stat(path); return err == nil })
	tok, err := web.ReadTokenFile(path)
	if err != nil {
		g.t.Fatal(err)
	}
	return tok
}

func TestWebPageInBrowser(t *testing.T) {
	// A short long-poll makes Telegram report itself up soon (the panel
	// shows it).
	s := setup{telegram: "poll_timeout: 1s"}
	g := newGW(t, s)
	g.writeConfig(s, "")
	// A reminder of a Telegram chat, for the panel to list and remove.
	next := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	jobs := `{"version": 1, "jobs": [{"id": "water1", "message": "water the plants", "schedule": {"kind": "every", "every": "24h0m0s"}, ` +
		`"chat": {"channel": "telegram", "chat_id": "100", "session_key": "telegram:100"}, "created_at": "` + next + `", "next_run": "` + next + `"}]}`
	if err := os.MkdirAll(filepath.Join(g.home, "cron"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(g.home, CronJobsFile), []byte(jobs), 0o600); err != nil {
		t.Fatal(err)
	}
	g.start()
	b := newBrowser(t)
	tok := webToken(g)

	// Log in: a wrong token is refused, the right one opens the chat.
	b.do("open the page", chromedp.Navigate(g.base+"/"), chromedp.WaitVisible(chromedp.CSS("#login-token")))
	b.do("wrong token", chromedp.SendKeys(chromedp.CSS("#login-token"), "wrong-token"), chromedp.Click(chromedp.CSS("#login-form button")))
	b.until("the refusal", `document.querySelector('#login-error').textContent.includes('wrong')`)
	eval[bool](b, `(document.querySelector('#login-token').value = '') === ''`)
	b.do("log in", chromedp.SendKeys(chromedp.CSS("#login-token"), tok),
		chromedp.Click(chromedp.CSS("#login-form button")), chromedp.WaitVisible(chromedp.CSS("#input")))
	// The login's answer says the panel is there: its button shows at once,
	// not only after a reload.
	b.until("the Control panel button after a fresh login", `!document.querySelector('#open-panel').hidden`)

	// The CSP is never violated: nothing inline is ever put in the page.
	const watchCSP = `(() => { window.csp = []; document.addEventListener('securitypolicyviolation',
		e => window.csp.push(e.violatedDirective + ' ' + e.blockedURI)); return true })()`
	checkCSP := func(when string) {
		t.Helper()
		if v := eval[[]string](b, `window.csp`); len(v) > 0 {
			t.Errorf("CSP violations %s: %v", when, v)
		}
	}
	eval[bool](b, watchCSP)

	// A reply streams in: a draft bubble grows before the final replaces it.
	// An observer in the page records every draft it shows, and whether
	// Stop was enabled meanwhile, so no poll can miss them.
	b.until("the stream", `document.querySelector('#transcript').dataset.ready === '1'`)
	eval[bool](b, `(() => { window.drafts = []; window.stopEnabled = false;
		new MutationObserver(() => { const d = document.querySelector('#transcript .msg.draft');
			if (d && d.textContent) { window.drafts.push(d.textContent); window.stopEnabled ||= !document.querySelector('#stop').disabled; } })
		.observe(document.querySelector('#transcript'), {subtree: true, childList: true, characterData: true}); return true })()`)
	answer := "Hello from the **fake** model. It streams in small pieces, so the page shows it growing word by word."
	g.script.Push(fakellm.Reply{Text: answer, Chunk: 6, ChunkDelay: 40 * time.Millisecond})
	b.send("hi there")
	b.until("the final answer", `!document.querySelector('#transcript .msg.draft') && `+lastAssistant+`.includes('word by word')`)
	if n := eval[int](b, `new Set(window.drafts).size`); n < 2 {
		t.Errorf("the page showed %d different drafts, want the reply growing", n)
	}
	if !eval[bool](b, `window.stopEnabled`) {
		t.Error("Stop is not enabled while a reply streams")
	}
	if got := eval[string](b, `document.querySelector('#transcript .msg.assistant strong').textContent`); got != "fake" {
		t.Errorf("Markdown not rendered: <strong> holds %q", got)
	}
	if !eval[bool](b, `document.querySelector('#stop').disabled`) {
		t.Error("Stop still enabled after the answer")
	}
	if got := g.script.Requests()[0].LastUserText(); !strings.Contains(got, "hi there") {
		t.Errorf("model got %q", got)
	}

	// Tool hints show while tools run, as in the chat apps.
	eval[bool](b, `(() => { window.statuses = []; const s = document.querySelector('#status-line');
		new MutationObserver(() => { if (!s.hidden && s.textContent) window.statuses.push(s.textContent) })
		.observe(s, {subtree: true, childList: true, characterData: true, attributes: true}); return true })()`)
	g.script.Push(fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "c1", Name: "list_dir", Args: `{"path":"."}`}}},
		fakellm.Reply{Text: "Your workspace holds a few files."})
	b.send("what is in my workspace?")
	b.until("the answer after the tool", lastAssistant+`.includes('a few files')`)
	if hints := eval[[]string](b, `window.statuses`); len(hints) == 0 || !strings.Contains(hints[0], "list_dir") {
		t.Errorf("tool hints shown: %q, want list_dir", hints)
	}
	if !eval[bool](b, `document.querySelector('#status-line').hidden`) {
		t.Error("the tool hint stays after the answer")
	}

	// Stop cancels a long answer, like /stop.
	g.script.Push(fakellm.Reply{Text: strings.Repeat("and on and on ", 200), Chunk: 8, ChunkDelay: 50 * time.Millisecond})
	b.send("tell me a very long story")
	b.until("the long draft", `(() => { const d = document.querySelector('#transcript .msg.draft'); return d && d.textContent.includes('and on') })()`)
	b.do("press Stop", chromedp.Click(chromedp.CSS("#stop")))
	b.until("the stop confirmation", `document.querySelector('#transcript').textContent.includes('Stopped')`)
	b.until("Stop disabled", `document.querySelector('#stop').disabled`)

	// A picture goes to the model as an image part.
	pic := filepath.Join(t.TempDir(), "cat.png")
	if err := os.WriteFile(pic, tinyPNG, 0o600); err != nil {
		t.Fatal(err)
	}
	g.script.Push(fakellm.Reply{Text: "A very small picture."})
	b.do("attach a picture", chromedp.SetUploadFiles(chromedp.CSS("#file"), []string{pic}))
	b.until("the attachment shown", `document.querySelector('#attachments').textContent.includes('cat.png')`)
	b.send("what is this?")
	b.until("the picture's answer", lastAssistant+`.includes('very small picture')`)
	reqs := g.script.Requests()
	last := reqs[len(reqs)-1]
	images := 0
	for _, m := range last.Messages {
		images += m.Images
	}
	if images != 1 {
		t.Errorf("model saw %d images, want 1", images)
	}

	// Model output cannot run script: <script>, event handlers and
	// javascript: links stay inert.
	g.script.Push(fakellm.Reply{Text: "Here: <script>window.pwned = 1</script> <img src=x onerror=\"window.pwned = 3\">\n\n" +
		"[click me](javascript:window.pwned=2) and [a safe one](https://example.com)\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```\ncode\n```"})
	b.send("show me something dangerous")
	b.until("the dangerous answer", lastAssistant+`.includes('click me')`)
	b.do("click the javascript: link", chromedp.Click(chromedp.CSS(`#transcript .msg.assistant:last-child a`)))
	checks := map[string]string{
		"no script element":       `document.querySelectorAll('#transcript script').length === 0`,
		"no img element":          `document.querySelectorAll('#transcript img').length === 0`,
		"no javascript: href":     `![...document.querySelectorAll('#transcript a')].some(a => (a.getAttribute('href') || '').toLowerCase().includes('javascript'))`,
		"no inline handler":       `![...document.querySelectorAll('#transcript *')].some(e => [...e.attributes].some(a => a.name.startsWith('on')))`,
		"nothing ran":             `typeof window.pwned === 'undefined'`,
		"safe link kept":          `[...document.querySelectorAll('#transcript a')].some(a => a.href === 'https://example.com/' && a.rel.includes('noopener'))`,
		"table rendered":          `document.querySelectorAll('#transcript table td').length === 2`,
		"code block has a button": `!!document.querySelector('#transcript pre button.copy')`,
	}
	for name, expr := range checks {
		if !eval[bool](b, expr) {
			t.Errorf("%s: %s is false", name, expr)
		}
	}

	checkCSP("in the chat")

	// A reload (like a reconnect after sleep) catches up from the session:
	// every answer once, none lost.
	b.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#input")))
	b.until("the conversation restored", lastAssistant+`.includes('click me')`)
	eval[bool](b, watchCSP)
	if n := eval[int](b, `[...document.querySelectorAll('#transcript .msg.assistant')].filter(m => m.textContent.includes('word by word')).length`); n != 1 {
		t.Errorf("after reload the first answer shows %d times, want 1", n)
	}
	b.screenshot("web-chat.png")

	// A note with a file from the message tool: shown with a download link
	// that works behind the login, and shown again after a reload, from
	// the session record.
	notes := filepath.Join(g.home, "workspace", "out", "notes.txt")
	if err := os.MkdirAll(filepath.Dir(notes), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(notes, []byte("my notes"), 0o600); err != nil {
		t.Fatal(err)
	}
	g.script.Push(fakellm.Reply{ToolCalls: []fakellm.Call{{ID: "m1", Name: "message",
		Args: `{"content":"Progress: half done","media":["out/notes.txt"]}`}}}, fakellm.Reply{Text: "All done."})
	b.send("write my notes")
	const noteLink = `[...document.querySelectorAll('#transcript .msg.assistant')].filter(m => m.textContent.includes('Progress: half done'))
		.map(m => m.querySelector('a.file')).filter(a => a && a.textContent.includes('notes.txt'))`
	b.until("the note with its file", noteLink+`.length === 1`)
	b.until("the turn over", `document.querySelector('#stop').disabled`)
	eval[bool](b, `(() => { window.fileText = ''; fetch(`+noteLink+`[0].href).then(r => r.text()).then(t => window.fileText = t); return true })()`)
	b.until("the file downloaded", `window.fileText === 'my notes'`)
	b.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#input")))
	b.until("the note and its file after the reload", noteLink+`.length === 1`)

	// The control panel: status, then memory, cron and pairing.
	pairing := channels.NewPairingStore(filepath.Join(g.home, PairingFile))
	code, err := pairing.Request("telegram", "4242", "@carol", "4242")
	if err != nil {
		t.Fatal(err)
	}
	b.do("open the panel", chromedp.Click(chromedp.CSS("#open-panel")), chromedp.WaitVisible(chromedp.CSS("#tab-status")))
	b.until("the status", `document.querySelector('#panel-body').textContent.includes('openai/gpt-4o-mini')`)
	// Telegram reports itself up after its first long poll: reload the
	// status until it does.
	b.until("telegram up", `(() => { const up = [...document.querySelectorAll('#panel-body tr')].some(r => r.textContent.startsWith('telegramup'));
		if (!up && !window.reloading) { window.reloading = true; setTimeout(() => { window.reloading = false; document.querySelector('#tab-status').click() }, 200) }
		return up })()`)
	b.screenshot("web-panel.png")

	// Memory: an edit is saved; an edit of a version the assistant has
	// since replaced is refused.
	mem := filepath.Join(g.home, "workspace", "memory", "MEMORY.md")
	b.do("open memory", chromedp.Click(chromedp.CSS("#tab-memory")), chromedp.WaitVisible(chromedp.CSS("#file-editor")))
	eval[bool](b, `(document.querySelector('#file-editor').value = '# Memory\n- The user waters plants on Sundays.\n') !== ''`)
	b.do("save memory", chromedp.Click(chromedp.CSS("#file-save")))
	b.until("saved", `document.querySelector('#file-msg').textContent.startsWith('Saved')`)
	if got, _ := os.ReadFile(mem); !strings.Contains(string(got), "waters plants on Sundays") {
		t.Fatalf("MEMORY.md = %q", got)
	}
	if err := os.WriteFile(mem, []byte("# Memory\n- written by the assistant meanwhile\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	eval[bool](b, `(document.querySelector('#file-editor').value += '- one more\n') !== ''`)
	b.do("save over a changed file", chromedp.Click(chromedp.CSS("#file-save")))
	b.until("the conflict", `document.querySelector('#file-msg').textContent.includes('changed since you opened it')`)
	if got, _ := os.ReadFile(mem); !strings.Contains(string(got), "meanwhile") {
		t.Fatalf("the assistant's version was overwritten: %q", got)
	}

	// Files: each file named once, every size in one unit style.
	b.do("open files", chromedp.Click(chromedp.CSS("#tab-files")))
	b.until("the files", `document.querySelectorAll('#panel-body tbody tr').length > 0`)
	rows := eval[[][]string](b, `[...document.querySelectorAll('#panel-body tbody tr')].map(r => [...r.cells].map(c => c.textContent))`)
	for _, r := range rows {
		if len(r) != 2 || !strings.Contains(r[0], ".md") {
			t.Errorf("files row %q, want the file's path and its size", r)
			continue
		}
		if r[1] != "missing" && !sizeStyle.MatchString(r[1]) {
			t.Errorf("%s: size %q is not in bytesize's style (\"2.9 KiB\", \"512 B\")", r[0], r[1])
		}
	}

	// Cron: the job is listed and removed (confirm() answered yes).
	eval[bool](b, `(window.confirm = () => true) !== null`)
	b.do("open cron", chromedp.Click(chromedp.CSS("#tab-cron")))
	b.until("the job", `document.querySelector('#panel-body').textContent.includes('water the plants')`)
	b.do("remove the job", chromedp.Click(chromedp.CSS(`button.remove[data-id="water1"]`)))
	b.until("no jobs", `document.querySelector('#panel-body').textContent.includes('No scheduled jobs')`)
	g.waitUntil("the job gone from jobs.json", func() bool {
		data, _ := os.ReadFile(filepath.Join(g.home, CronJobsFile))
		return !strings.Contains(string(data), "water1")
	})

	// Pairing: the pending code is approved.
	b.do("open pairing", chromedp.Click(chromedp.CSS("#tab-pairing")))
	b.until("the code", `!!document.querySelector('button.approve[data-code="`+code+`"]')`)
	b.screenshot("web-panel-pairing.png")
	b.do("approve", chromedp.Click(chromedp.CSS(`button.approve[data-code="`+code+`"]`)))
	b.until("approved", `document.querySelector('#panel-body').textContent.includes('No pending codes')`)
	if ok, _ := pairing.IsApproved("telegram", "4242"); !ok {
		t.Fatal("the sender is not approved")
	}
	checkCSP("in the panel")
}

// tinyPNG is a 1×1 picture.
var tinyPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")

// A network blip in the middle of a streamed answer: the page loses its
// stream, the answer completes meanwhile, and once the network is back the
// page shows it exactly once, without a leftover draft.
func TestWebPageCatchesUpAfterABlip(t *testing.T) {
	g := startWith(t, setup{})
	link := fakes.NewOutage(t, g.base) // the network between the browser and the gateway
	b := newBrowser(t)
	tok := webToken(g)
	b.do("log in", chromedp.Navigate(link.URL()+"/"), chromedp.WaitVisible(chromedp.CSS("#login-token")),
		chromedp.SendKeys(chromedp.CSS("#login-token"), tok), chromedp.Click(chromedp.CSS("#login-form button")),
		chromedp.WaitVisible(chromedp.CSS("#input")))
	b.until("the stream", `document.querySelector('#transcript').dataset.ready === '1'`)

	answer := strings.TrimSpace(strings.Repeat("Every word of this answer arrives while the page is offline. ", 6))
	g.script.Push(fakellm.Reply{Text: answer, Chunk: 8, ChunkDelay: 30 * time.Millisecond})
	b.send("tell me something while I go through a tunnel")
	b.until("a draft", `(() => { const d = document.querySelector('#transcript .msg.draft'); return d && d.textContent.length > 0 })()`)
	chat := "web:" + eval[string](b, `document.querySelector('#chats li.active').dataset.id`)
	link.Down()
	g.waitUntil("the answer stored while the page is offline", func() bool {
		msgs := g.sessionMessages(chat)
		return len(msgs) > 0 && msgs[len(msgs)-1].Role == llm.RoleAssistant
	})
	link.Up()
	b.until("the whole answer", `!document.querySelector('#transcript .msg.draft') && `+lastAssistant+`.includes('offline')`)
	answers := eval[int](b, `[...document.querySelectorAll('#transcript .msg.assistant')].length`)
	questions := eval[int](b, `[...document.querySelectorAll('#transcript .msg.user')].length`)
	if answers != 1 || questions != 1 {
		t.Fatalf("after the blip the page shows %d answers and %d questions, want 1 and 1", answers, questions)
	}
	if got := eval[string](b, lastAssistant); strings.TrimSpace(got) != answer {
		t.Fatalf("answer shown = %q", got)
	}
}

// sizeStyle is how bytesize.Format writes a size.
var sizeStyle = regexp.MustCompile(`^(\d+ B|\d+\.\d (KiB|MiB|GiB))$`)

// layout is what a phone shows of the page: where the composer's text box
// sits, whether the page itself scrolls, and where the transcript is.
type layout struct {
	InputTop, InputBottom, ViewHeight  float64
	PageScroll                         float64 // how far the page could scroll; 0 when only its parts do
	TranscriptHeight, TranscriptClient float64
	TranscriptBottomGap                float64 // scrollHeight - scrollTop - clientHeight; 0 at the newest message
}

const measureLayout = `(() => {
	const r = document.querySelector('#input').getBoundingClientRect();
	const t = document.querySelector('#transcript');
	const page = document.scrollingElement;
	return { InputTop: r.top, InputBottom: r.bottom, ViewHeight: window.innerHeight,
		PageScroll: page.scrollHeight - page.clientHeight,
		TranscriptHeight: t.scrollHeight, TranscriptClient: t.clientHeight,
		TranscriptBottomGap: t.scrollHeight - t.scrollTop - t.clientHeight };
})()`

// On a phone (390×844, the size of a common one) with a long conversation,
// the composer stays in view, the transcript scrolls inside the page (not
// the page), and a chat opens at its newest message, also after a reload.
// The login card keeps off the screen's edges and needs no scrollbar.
func TestWebPageOnAPhone(t *testing.T) {
	g := startWith(t, setup{})
	b := newBrowser(t)
	tok := webToken(g)
	b.do("a phone's screen", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulateScale(1)))

	b.do("open the page", chromedp.Navigate(g.base+"/"), chromedp.WaitVisible(chromedp.CSS("#login-token")))
	card := eval[struct{ Left, Right, Width, PageScroll float64 }](b, `(() => {
		const r = document.querySelector('#login-form').getBoundingClientRect(), page = document.scrollingElement;
		return { Left: r.left, Right: r.right, Width: window.innerWidth, PageScroll: page.scrollHeight - page.clientHeight };
	})()`)
	if card.Left < 8 || card.Width-card.Right < 8 {
		t.Errorf("the login card spans x %.0f..%.0f of %.0f: it touches the screen's edges", card.Left, card.Right, card.Width)
	}
	if card.PageScroll > 0 {
		t.Errorf("the login page scrolls by %.0f px; it fits the screen", card.PageScroll)
	}
	b.do("log in", chromedp.SendKeys(chromedp.CSS("#login-token"), tok),
		chromedp.Click(chromedp.CSS("#login-form button")), chromedp.WaitVisible(chromedp.CSS("#input")))
	b.until("the stream", `document.querySelector('#transcript').dataset.ready === '1'`)

	// A conversation several screens long: each answer is a page of text.
	const turns = 6
	for i := range turns {
		g.script.Push(fakellm.Reply{Text: fmt.Sprintf("Answer %d.\n\n%s", i, strings.Repeat("A line of a long answer that wraps on a narrow screen.\n\n", 12))})
		b.send(fmt.Sprintf("question %d", i))
		b.until(fmt.Sprintf("answer %d", i), `!document.querySelector('#transcript .msg.draft') && `+lastAssistant+fmt.Sprintf(`.includes('Answer %d.')`, i))
	}
	check := func(when string) {
		t.Helper()
		l := eval[layout](b, measureLayout)
		if l.TranscriptHeight < 3*l.ViewHeight {
			t.Fatalf("%s: the transcript is %.0f px tall, not the long conversation this test needs", when, l.TranscriptHeight)
		}
		if l.InputTop < 0 || l.InputBottom > l.ViewHeight {
			t.Errorf("%s: the text box sits at y %.0f..%.0f, outside the %.0f px screen", when, l.InputTop, l.InputBottom, l.ViewHeight)
		}
		if l.PageScroll > 0 {
			t.Errorf("%s: the whole page scrolls by %.0f px; only the transcript should", when, l.PageScroll)
		}
		if l.TranscriptClient >= l.TranscriptHeight {
			t.Errorf("%s: the transcript shows all its %.0f px at once; it should scroll", when, l.TranscriptHeight)
		}
		if l.TranscriptBottomGap > 2 {
			t.Errorf("%s: the transcript is %.0f px above its newest message", when, l.TranscriptBottomGap)
		}
	}
	check("after the conversation")
	b.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#input")))
	b.until("the conversation restored", lastAssistant+fmt.Sprintf(`.includes('Answer %d.')`, turns-1))
	check("after a reload")
	b.screenshot("web-phone.png")
}
