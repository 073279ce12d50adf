package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
	goopenai "github.com/sashabaranov/go-openai"
	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot"
	"github.com/nanobot-go/nanobot/internal/agent"
	"github.com/nanobot-go/nanobot/internal/channels/telegram"
	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/schedule"
	"github.com/nanobot-go/nanobot/internal/skills"
	"github.com/nanobot-go/nanobot/internal/skills/builtin"
	"github.com/nanobot-go/nanobot/internal/tools"
	"github.com/nanobot-go/nanobot/internal/tools/web"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

// floor is the whole program's state.
type floor struct {
	cfg     *config.Config
	model   string
	tgURL   string // .../bot<token>
	poll    time.Duration
	hc      *http.Client
	tg      *bot.Bot
	llm     *goopenai.Client
	system  []byte // the system message, encoded
	tools   []byte // the tool list, encoded
	dir     string // journal and sessions
	journal *os.File

	mu    sync.Mutex
	chats map[int64]*chat
	wg    sync.WaitGroup
}

// chat is one chat's turns, run one at a time in arrival order.
type chat struct {
	id   int64
	in   chan string
	file *os.File
	hist [][]byte // encoded messages since the window was last halved
}

// The placeholders go-openai encodes in place of the messages and the tools,
// replaced by the spliced bytes before the request is sent.
var (
	messagesHole = []byte(`[{"role":"floor-messages"}]`)
	toolsHole    = []byte(`[{"type":"floor-tools"}]`)
)

type messagesKey struct{}

func newFloor(cfgPath string) (*floor, error) {
	cfg, err := config.Load(cfgPath, telegram.Section)
	if err != nil {
		return nil, err
	}
	route, err := cfg.ResolveRoute(cfg.Agents.Model)
	if err != nil {
		return nil, err
	}
	prov := cfg.Providers[route.Provider]
	tc := telegram.Of(cfg)
	f := &floor{
		cfg: cfg, model: route.Model, poll: tc.PollTimeout,
		tgURL: strings.TrimRight(tc.APIURL, "/") + "/bot" + tc.Token,
		dir:   filepath.Join(cfg.Agents.Workspace, "floor"),
		chats: map[int64]*chat{},
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 16
	f.hc = &http.Client{Transport: tr}

	if _, err := workspace.Install(nanobot.WorkspaceTemplate(), cfg.Agents.Workspace); err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	files, err := workspace.OpenFiles(cfg.Agents.Workspace, nil)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	defer files.Close()
	prompt, _, err := (&agent.PromptBuilder{Workspace: cfg.Agents.Workspace, Files: files, MaxFileChars: cfg.Agents.BootstrapMaxChars,
		Skills: skills.Loader{Builtin: builtin.FS()}}).BuildEstimated()
	if err != nil {
		return nil, fmt.Errorf("system prompt: %w", err)
	}
	if f.system, err = json.Marshal(goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleSystem, Content: prompt}); err != nil {
		return nil, err
	}
	if f.tools, err = toolList(cfg); err != nil {
		return nil, err
	}

	if f.tg, err = bot.New(tc.Token, bot.WithSkipGetMe(), bot.WithServerURL(strings.TrimRight(tc.APIURL, "/")),
		bot.WithHTTPClient(f.poll, knownLength{f.hc})); err != nil {
		return nil, fmt.Errorf("telegram: %w", err)
	}
	oc := goopenai.DefaultConfig(prov.APIKey)
	if prov.BaseURL != "" {
		oc.BaseURL = prov.BaseURL
	}
	oc.HTTPClient = splicer{f.hc, f.tools}
	f.llm = goopenai.NewClientWithConfig(oc)

	if err := os.MkdirAll(filepath.Join(f.dir, "sessions"), 0o700); err != nil {
		return nil, err
	}
	if f.journal, err = os.OpenFile(filepath.Join(f.dir, "updates.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
		return nil, err
	}
	return f, nil
}

// toolList encodes the tools nanobot's gateway offers by default, from the
// same constructors, in the same order (by name).
func toolList(cfg *config.Config) ([]byte, error) {
	root, err := workspace.OpenRoot(cfg.Agents.Workspace, workspace.Options{})
	if err != nil {
		return nil, err
	}
	defer root.Close()
	log := zap.NewNop()
	list := []tools.Tool{
		tools.NewReadFile(root, tools.WithMount(skills.BuiltinScheme, builtin.FS())),
		tools.NewWriteFile(root),
		tools.NewEditFile(root),
		tools.NewListDir(root),
		tools.NewMessage(nil, nil, root),
		web.NewSearch(web.SearchConfig{Provider: cfg.Tools.Web.SearchProvider, MaxResults: cfg.Tools.Web.MaxResults}, log),
		web.NewFetch(web.FetchConfig{MaxBytes: cfg.Tools.Web.FetchMaxBytes}, log),
	}
	if cfg.Tools.Exec.Enabled {
		exec, err := tools.NewExec(cfg.Tools.Exec, root, tools.ExecOptions{}, log)
		if err != nil {
			return nil, err
		}
		list = append(list, exec)
	}
	// The gateway's agent adds these two; their specs need no state.
	list = append(list, (*agent.Agent)(nil).SpawnTool(), (*schedule.CronTool)(nil))
	slices.SortFunc(list, func(a, b tools.Tool) int { return strings.Compare(a.Spec().Name, b.Spec().Name) })
	out := make([]goopenai.Tool, 0, len(list))
	for _, t := range list {
		s := t.Spec()
		var compact bytes.Buffer
		if err := json.Compact(&compact, s.Parameters); err != nil {
			return nil, fmt.Errorf("tool %s: %w", s.Name, err)
		}
		out = append(out, goopenai.Tool{Type: goopenai.ToolTypeFunction, Function: &goopenai.FunctionDefinition{
			Name: s.Name, Description: s.Description, Parameters: json.RawMessage(compact.Bytes())}})
	}
	return json.Marshal(out)
}

func (f *floor) close() {
	_ = f.journal.Close()
	for _, c := range f.chats {
		_ = c.file.Close()
	}
}

// serve answers /healthz and polls until ctx ends, then waits for the
// turns under way.
func (f *floor) serve(ctx context.Context) error {
	ln, err := net.Listen("tcp", f.cfg.Gateway.Listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })}
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Close() }()

	err = f.pollLoop(ctx)
	// pollLoop has returned: nothing delivers any more. The chats stay in
	// the map for close, which closes their files.
	f.mu.Lock()
	for _, c := range f.chats {
		close(c.in)
	}
	f.mu.Unlock()
	f.wg.Wait()
	return err
}

// pollLoop long-polls getUpdates. A batch is journaled and its turns start
// while the journal is fsync'd; the next call, which confirms the batch to
// Telegram, is made only after the fsync.
func (f *floor) pollLoop(ctx context.Context) error {
	var offset int64
	timeout := time.Duration(0) // the first call answers at once
	var line []byte
	for ctx.Err() == nil {
		batch, err := f.getUpdates(ctx, offset, timeout)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			fmt.Fprintln(os.Stderr, "getUpdates:", err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		timeout = f.poll
		if len(batch) == 0 {
			continue
		}
		line = line[:0]
		for _, raw := range batch {
			line = append(append(line, raw...), '\n')
		}
		if _, err := f.journal.Write(line); err != nil {
			return fmt.Errorf("journal: %w", err)
		}
		for _, raw := range batch {
			var u models.Update
			if err := json.Unmarshal(raw, &u); err != nil {
				return fmt.Errorf("update: %w", err)
			}
			offset = u.ID + 1
			if u.Message != nil && u.Message.Text != "" {
				f.deliver(ctx, u.Message.Chat.ID, header(u.Message)+u.Message.Text)
			}
		}
		if err := f.journal.Sync(); err != nil {
			return fmt.Errorf("journal: %w", err)
		}
	}
	return ctx.Err()
}

func (f *floor) getUpdates(ctx context.Context, offset int64, timeout time.Duration) ([]json.RawMessage, error) {
	body := `{"offset":` + strconv.FormatInt(offset, 10) + `,"timeout":` + strconv.Itoa(int(timeout/time.Second)) +
		`,"allowed_updates":["message"]}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.tgURL+"/getUpdates", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var env struct {
		OK     bool              `json:"ok"`
		Result []json.RawMessage `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return nil, err
	}
	if !env.OK {
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return env.Result, nil
}

// header is the line nanobot puts before a user's message, so the floor's
// request is as long as nanobot's.
func header(m *models.Message) string {
	h := "[" + time.Now().UTC().Format("Mon 2006-01-02 15:04 MST") + " · telegram · chat " + strconv.FormatInt(m.Chat.ID, 10)
	if m.From != nil {
		h += " · from " + m.From.FirstName
	}
	return h + "]\n"
}

// deliver queues text for its chat's worker, starting the worker on the
// chat's first message.
func (f *floor) deliver(ctx context.Context, id int64, text string) {
	f.mu.Lock()
	c := f.chats[id]
	if c == nil {
		file, err := os.OpenFile(filepath.Join(f.dir, "sessions", strconv.FormatInt(id, 10)+".jsonl"),
			os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			f.mu.Unlock()
			fmt.Fprintln(os.Stderr, "session:", err)
			return
		}
		c = &chat{id: id, in: make(chan string, 64), file: file}
		f.chats[id] = c
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			for text := range c.in {
				if err := f.turn(ctx, c, text); err != nil && ctx.Err() == nil {
					fmt.Fprintf(os.Stderr, "chat %d: %v\n", c.id, err)
				}
			}
		}()
	}
	f.mu.Unlock()
	c.in <- text
}

// turn is one model call, one durable append, one sendMessage.
func (f *floor) turn(ctx context.Context, c *chat, text string) error {
	user, err := json.Marshal(goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleUser, Content: text})
	if err != nil {
		return err
	}
	msgs := make([]byte, 0, len(f.system)+len(user)+64*len(c.hist)+2)
	msgs = append(append(msgs, '['), f.system...)
	for _, m := range c.hist {
		msgs = append(append(msgs, ','), m...)
	}
	msgs = append(append(append(msgs, ','), user...), ']')

	stream, err := f.llm.CreateChatCompletionStream(context.WithValue(ctx, messagesKey{}, msgs), goopenai.ChatCompletionRequest{
		Model:    f.model,
		Messages: []goopenai.ChatCompletionMessage{{Role: "floor-messages"}},
		Tools:    []goopenai.Tool{{Type: "floor-tools"}},
		// nanobot sends these two as well.
		//lint:ignore SA1019 as nanobot does for a model that is not a reasoning one (internal/provider/openai)
		MaxTokens:     8192,
		StreamOptions: &goopenai.StreamOptions{IncludeUsage: true},
	})
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	var answer strings.Builder
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			_ = stream.Close()
			return fmt.Errorf("model stream: %w", err)
		}
		if len(resp.Choices) > 0 {
			answer.WriteString(resp.Choices[0].Delta.Content)
		}
	}
	_ = stream.Close()

	reply, err := json.Marshal(goopenai.ChatCompletionMessage{Role: goopenai.ChatMessageRoleAssistant, Content: answer.String()})
	if err != nil {
		return err
	}
	rec := make([]byte, 0, len(user)+len(reply)+2)
	rec = append(append(append(append(rec, user...), '\n'), reply...), '\n')
	if _, err := c.file.Write(rec); err != nil {
		return fmt.Errorf("session: %w", err)
	}
	if err := c.file.Sync(); err != nil {
		return fmt.Errorf("session: %w", err)
	}
	c.hist = append(c.hist, user, reply)
	if w := f.cfg.Agents.MemoryWindow; w > 0 && len(c.hist) > w {
		// What nanobot's consolidation leaves: the newer half of the window.
		c.hist = append(c.hist[:0:0], c.hist[len(c.hist)-w/2:]...)
	}
	_, err = f.tg.SendMessage(ctx, &bot.SendMessageParams{ChatID: c.id, Text: answer.String()})
	if err != nil {
		return fmt.Errorf("sendMessage: %w", err)
	}
	return nil
}

// splicer puts the call's messages and the tool list in place of the
// placeholders go-openai encoded, and reads the rest of a finished stream
// before closing it so the connection is kept (nanobot's adapter does both).
type splicer struct {
	c     *http.Client
	tools []byte
}

func (s splicer) Do(req *http.Request) (*http.Response, error) {
	if msgs, ok := req.Context().Value(messagesKey{}).([]byte); ok && req.Body != nil {
		env, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		env = bytes.Replace(env, messagesHole, msgs, 1)
		env = bytes.Replace(env, toolsHole, s.tools, 1)
		req.ContentLength = int64(len(env))
		req.Body = io.NopCloser(bytes.NewReader(env))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(env)), nil }
	}
	resp, err := s.c.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body = drainOnClose{resp.Body}
	return resp, nil
}

type drainOnClose struct{ io.ReadCloser }

func (d drainOnClose) Close() error {
	_, _ = io.Copy(io.Discard, io.LimitReader(d.ReadCloser, 4<<10))
	return d.ReadCloser.Close()
}

// knownLength reads the bot library's form (streamed through a pipe) before
// sending it, so it goes out with its length in one write, as nanobot's
// client does.
type knownLength struct{ c *http.Client }

func (k knownLength) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.ContentLength == 0 {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		req.ContentLength = int64(len(body))
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	return k.c.Do(req)
}
