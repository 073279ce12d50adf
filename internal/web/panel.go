package web

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/nanobot-go/nanobot/internal/bytesize"
	"github.com/nanobot-go/nanobot/internal/channels"
	"github.com/nanobot-go/nanobot/internal/history"
	"github.com/nanobot-go/nanobot/internal/llm"
	"github.com/nanobot-go/nanobot/internal/usage"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

// Panel is the control panel: what it shows and what it may change. The
// daemon fills it; a nil func or interface leaves its part empty.
type Panel struct {
	Version string
	Started time.Time
	// Model, Fallbacks and Routes (name → model) describe the routing.
	Model     string
	Fallbacks []string
	Routes    map[string]string
	// Budget is the token budget of a projection (context window minus the
	// reply, or history.budget when lower), and HighWater and LowWater the
	// history's water marks, for the level of detail each observation would
	// be sent at.
	Budget              int
	HighWater, LowWater float64
	// Workspace holds memory/MEMORY.md and the bootstrap files.
	Workspace string
	Channels  func() []ChannelState
	MCP       func() []MCPState
	// Ledger is the usage ledger the Usage view and the status's token
	// table read [none: the panel says so].
	Ledger  usage.Reader
	Cron    CronJobs
	Pairing Pairing

	sessions Sessions
	now      func() time.Time
	log      *zap.Logger
	// edit serialises the panel's own file edits (check, then write);
	// across processes the files' flock does (see guard).
	edit sync.Mutex
}

// ChannelState is one channel's health.
type ChannelState struct {
	Name  string `json:"name"`
	Up    bool   `json:"up"`
	Error string `json:"error,omitempty"`
}

// MCPState is one MCP server.
type MCPState struct {
	Name      string `json:"name"`
	Transport string `json:"transport"`
	State     string `json:"state"`
	Tools     int    `json:"tools"`
	Error     string `json:"error,omitempty"`
}

// CronJob is one scheduled job, of any chat.
type CronJob struct {
	ID       string    `json:"id"`
	Session  string    `json:"session"`
	Schedule string    `json:"schedule"`
	Message  string    `json:"message"`
	NextRun  time.Time `json:"next_run"`
	Runs     int       `json:"runs"`
}

// CronJobs lists and removes the scheduler's jobs.
type CronJobs interface {
	All() ([]CronJob, error)
	// Remove deletes job id; ok is false when there is none.
	Remove(id string) (ok bool, err error)
}

// Pairing is what the panel uses of the pairing store (channels.Pairing:
// the file, or the KV bucket with NATS).
type Pairing interface {
	List() (channels.PairingState, error)
	Approve(code string) (channels.Approval, error)
	Deny(code string) (channels.PairingRequest, error)
	Revoke(channel, senderID string) (bool, error)
}

// editable are the workspace files the panel shows and edits, by name.
var editable = []struct{ name, rel string }{
	{"MEMORY.md", "memory/MEMORY.md"},
	{"AGENTS.md", "AGENTS.md"},
	{"SOUL.md", "SOUL.md"},
	{"USER.md", "USER.md"},
	{"TOOLS.md", "TOOLS.md"},
	{"HEARTBEAT.md", "HEARTBEAT.md"},
}

// maxFile caps a file the panel edits: the cap of a prompt file.
const maxFile = workspace.MaxPromptFileBytes

// maxSearch caps the results of a session search.
const maxSearch = 100

func (p *Panel) routes(api func(string, http.HandlerFunc)) {
	api("GET /api/panel/status", p.status)
	api("GET /api/panel/usage", p.usageView)
	api("GET /api/panel/sessions", p.listSessions)
	api("GET /api/panel/sessions/{key}", p.showSession)
	api("GET /api/panel/files", p.listFiles)
	api("GET /api/panel/files/{name}", p.readFile)
	api("PUT /api/panel/files/{name}", p.writeFile)
	api("GET /api/panel/cron", p.listCron)
	api("DELETE /api/panel/cron/{id}", p.removeCron)
	api("GET /api/panel/pairing", p.listPairing)
	api("POST /api/panel/pairing/{code}/approve", p.approve)
	api("POST /api/panel/pairing/{code}/deny", p.deny)
	api("POST /api/panel/pairing/revoke", p.revoke)
}

func (p *Panel) status(w http.ResponseWriter, r *http.Request) {
	out := map[string]any{
		"version": p.Version, "started": p.Started, "uptime": p.now().Sub(p.Started).Round(time.Second).String(),
		"model": p.Model, "fallbacks": p.Fallbacks, "routes": p.Routes,
		"channels": []ChannelState{}, "mcp": []MCPState{}, "usage": []ModelUsage{},
	}
	if p.Channels != nil {
		out["channels"] = p.Channels()
	}
	if p.MCP != nil {
		out["mcp"] = p.MCP()
	}
	if p.Ledger != nil {
		u, err := p.modelUsage()
		if err != nil {
			p.fail(w, "usage", err)
			return
		}
		out["usage"] = u
		out["timezone"] = p.Ledger.Location().String()
	}
	writeJSON(w, http.StatusOK, out)
}

// sessionSummary is one session in the list.
type sessionSummary struct {
	Key  string `json:"key"`
	Size int64  `json:"size"`
	// SizeText is Size as a person reads it (bytesize.Format), so every
	// size the panel shows has one unit style.
	SizeText string    `json:"size_text"`
	Modified time.Time `json:"modified"`
}

// hit is one message that matched a search.
type hit struct {
	Key     string `json:"key"`
	Index   int    `json:"index"`
	Role    string `json:"role"`
	Snippet string `json:"snippet"`
}

// listSessions lists every channel's live sessions, newest first; with
// ?q= it searches their messages' text instead (case-insensitive).
func (p *Panel) listSessions(w http.ResponseWriter, r *http.Request) {
	infos, err := p.sessions.List()
	if err != nil {
		p.fail(w, "list sessions", err)
		return
	}
	slices.SortFunc(infos, func(a, b sessionInfo) int { return b.ModTime.Compare(a.ModTime) })
	q := strings.ToLower(strings.TrimSpace(r.URL.Query().Get("q")))
	if q == "" {
		out := make([]sessionSummary, 0, len(infos))
		for _, in := range infos {
			out = append(out, sessionSummary{Key: in.Key, Size: in.Size, SizeText: bytesize.Format(in.Size), Modified: in.ModTime})
		}
		writeJSON(w, http.StatusOK, map[string]any{"sessions": out})
		return
	}
	hits := []hit{}
	for _, in := range infos {
		snap, err := p.sessions.Get(in.Key)
		if err != nil {
			continue
		}
		for i, m := range snap.Messages {
			text := messageText(m)
			at := strings.Index(strings.ToLower(text), q)
			if at < 0 {
				continue
			}
			hits = append(hits, hit{Key: in.Key, Index: i, Role: string(m.Role), Snippet: snippet(text, at, len(q))})
			if len(hits) == maxSearch {
				writeJSON(w, http.StatusOK, map[string]any{"hits": hits, "truncated": true})
				return
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"hits": hits})
}

// entry is one stored message as the panel shows it.
type entry struct {
	Index int    `json:"index"`
	Role  string `json:"role"`
	Time  string `json:"time,omitempty"`
	Text  string `json:"text"`
	// Level is the detail an observation (tool result, large user input)
	// would be sent at in the next model call: live, summary, gist, or
	// "not sent" when its turn falls outside the budget.
	Level string `json:"level,omitempty"`
	Model string `json:"model,omitempty"`
	Usage string `json:"usage,omitempty"`
}

func (p *Panel) showSession(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	infos, err := p.sessions.List()
	if err != nil {
		p.fail(w, "list sessions", err)
		return
	}
	if !slices.ContainsFunc(infos, func(in sessionInfo) bool { return in.Key == key }) {
		writeError(w, http.StatusNotFound, "no such session")
		return
	}
	snap, err := p.sessions.Get(key)
	if err != nil {
		p.fail(w, "read session", err)
		return
	}
	levels := observationLevels(snap.Messages, snap.Consolidated, history.Options{Budget: p.Budget, HighWater: p.HighWater, LowWater: p.LowWater})
	out := make([]entry, 0, len(snap.Messages))
	for i, m := range snap.Messages {
		e := entry{Index: i, Role: string(m.Role), Text: clip(messageText(m), 4000), Level: levels[i]}
		if !m.Time.IsZero() {
			e.Time = m.Time.UTC().Format("2006-01-02 15:04:05")
		}
		if m.Meta != nil && m.Role == llm.RoleAssistant {
			e.Model = strings.Trim(m.Meta.Provider+"/"+m.Meta.Model, "/")
			if u := m.Meta.Usage; u.InputTokens+u.OutputTokens > 0 {
				e.Usage = fmt.Sprintf("%d in, %d out", u.InputTokens, u.OutputTokens)
			}
		}
		out = append(out, e)
	}
	writeJSON(w, http.StatusOK, map[string]any{"key": key, "consolidated": snap.Consolidated, "messages": out})
}

// observationLevels returns, per stored message, the level of detail its
// observation would be sent at by the next projection (history.Project of
// the messages from the consolidation offset from, as the agent projects
// them, with opt), found by comparing what the projection rendered with
// the stored renderings; "" for messages that are not observations.
func observationLevels(msgs []llm.Message, from int, opt history.Options) []string {
	out := make([]string, len(msgs))
	v := history.Project("", msgs[from:], opt)
	results := map[string]string{} // tool call id → text sent
	var users []string             // each user message's text as sent, in order
	for _, m := range v.Messages {
		if m.Role == llm.RoleUser {
			users = append(users, userText(m, asSent))
		}
		for _, part := range m.Parts {
			if part.Kind == llm.PartToolResult && part.Result != nil {
				results[part.Result.ToolCallID] = part.Result.Content.Live
			}
		}
	}
	// Projection keeps every user message from its cut on, in order, so
	// the last len(users) stored user messages are the ones sent.
	firstSent := countUsers(msgs) - len(users)
	userAt := 0
	for i, m := range msgs {
		switch m.Role {
		case llm.RoleTool:
			for _, part := range m.Parts {
				if part.Kind == llm.PartToolResult && part.Result != nil {
					sent, ok := results[part.Result.ToolCallID]
					out[i] = levelOf(part.Result.Content, sent, ok)
				}
			}
		case llm.RoleUser:
			k := userAt - firstSent
			userAt++
			if !summarized(m) {
				continue
			}
			if k < 0 || k >= len(users) {
				out[i] = "not sent"
				continue
			}
			out[i] = "gist"
			for _, l := range []llm.Level{llm.Live, llm.Summary} {
				if users[k] == userText(m, l) {
					out[i] = l.String()
					break
				}
			}
		}
	}
	return out
}

// asSent asks userText for the text parts as they are.
const asSent = llm.Level(255)

// userText joins a user message's text parts at level l (asSent: as they
// are).
func userText(m llm.Message, l llm.Level) string {
	var parts []string
	for _, p := range m.Parts {
		if p.Kind != llm.PartText {
			continue
		}
		if l == asSent {
			parts = append(parts, p.Text)
			continue
		}
		parts = append(parts, llm.Content{Live: p.Text, Summary: p.Summary, Gist: p.Gist}.At(l))
	}
	return strings.Join(parts, "\n")
}

func summarized(m llm.Message) bool {
	for _, p := range m.Parts {
		if p.Kind == llm.PartText && (p.Summary != "" || p.Gist != "") {
			return true
		}
	}
	return false
}

func countUsers(msgs []llm.Message) int {
	n := 0
	for _, m := range msgs {
		if m.Role == llm.RoleUser {
			n++
		}
	}
	return n
}

func levelOf(c llm.Content, sent string, ok bool) string {
	switch {
	case !ok:
		return "not sent"
	case sent == c.At(llm.Live):
		return llm.Live.String()
	case sent == c.At(llm.Summary):
		return llm.Summary.String()
	default:
		return llm.Gist.String()
	}
}

// messageText is a message's text for the panel: text, tool calls and
// results, files.
func messageText(m llm.Message) string {
	var b strings.Builder
	add := func(s string) {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString(s)
	}
	for _, p := range m.Parts {
		switch p.Kind {
		case llm.PartText:
			add(p.Text)
		case llm.PartToolCall:
			if p.Call != nil {
				add(fmt.Sprintf("→ %s(%s)", p.Call.Name, cmpOr(string(p.Call.Arguments), p.Call.RawArgs)))
			}
		case llm.PartToolResult:
			if p.Result != nil {
				add(fmt.Sprintf("← %s: %s", p.Result.Name, p.Result.Content.Live))
			}
		case llm.PartImage:
			add("[picture]")
		case llm.PartFileRef:
			if p.File != nil {
				add("[file " + p.File.Path + "]")
			}
		}
	}
	return b.String()
}

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + " …"
}

func snippet(text string, at, n int) string {
	lo, hi := max(at-60, 0), min(at+n+60, len(text))
	for lo > 0 && !utf8.RuneStart(text[lo]) {
		lo--
	}
	for hi < len(text) && !utf8.RuneStart(text[hi]) {
		hi++
	}
	s := text[lo:hi]
	if lo > 0 {
		s = "…" + s
	}
	if hi < len(text) {
		s += "…"
	}
	return s
}

// fail logs an internal error and answers 500 without its details.
func (p *Panel) fail(w http.ResponseWriter, what string, err error) {
	p.log.Error("web panel: "+what, zap.Error(err))
	writeError(w, http.StatusInternalServerError, what+" failed; see the daemon log")
}

// ---- files

func fileRel(name string) (string, bool) {
	for _, e := range editable {
		if e.name == name {
			return e.rel, true
		}
	}
	return "", false
}

func etagOf(data []byte) string {
	h := sha256.Sum256(data)
	return `"` + hex.EncodeToString(h[:16]) + `"`
}

// read returns a workspace file's content (empty when missing) through
// the daemon's confined access (workspace.Files). A file the daemon refuses
// — a link out of the workspace, a FIFO, one over the cap, not UTF-8 —
// reads as empty with problem set: the panel shows why, and saving
// replaces it with a regular file.
func (p *Panel) read(rel string) (data []byte, exists bool, problem string, err error) {
	files, err := workspace.OpenFiles(p.Workspace, nil)
	if err != nil {
		return nil, false, "", fmt.Errorf("open workspace: %w", err)
	}
	defer files.Close()
	text, ok, err := files.ReadText(rel, maxFile)
	var pe *workspace.PathError
	if errors.As(err, &pe) {
		return nil, true, workspace.Problem(err), nil
	}
	if err != nil {
		return nil, false, "", fmt.Errorf("read %s: %w", rel, err)
	}
	return []byte(text), ok, "", nil
}

func (p *Panel) listFiles(w http.ResponseWriter, r *http.Request) {
	type file struct {
		Name     string `json:"name"`
		Path     string `json:"path"`
		Exists   bool   `json:"exists"`
		Size     int    `json:"size"`
		SizeText string `json:"size_text"` // as sessionSummary's
		// Problem says why the daemon leaves the file out (a link, a
		// FIFO, ...); saving replaces it.
		Problem string `json:"problem,omitempty"`
	}
	out := make([]file, 0, len(editable))
	for _, e := range editable {
		data, ok, problem, err := p.read(e.rel)
		if err != nil {
			p.fail(w, "read "+e.rel, err)
			return
		}
		out = append(out, file{Name: e.name, Path: e.rel, Exists: ok, Size: len(data), SizeText: bytesize.Format(int64(len(data))), Problem: problem})
	}
	writeJSON(w, http.StatusOK, map[string]any{"files": out})
}

func (p *Panel) readFile(w http.ResponseWriter, r *http.Request) {
	rel, ok := fileRel(r.PathValue("name"))
	if !ok {
		writeError(w, http.StatusNotFound, "no such file (the panel edits MEMORY.md and the bootstrap files)")
		return
	}
	data, _, problem, err := p.read(rel)
	if err != nil {
		p.fail(w, "read "+rel, err)
		return
	}
	tag := etagOf(data)
	w.Header().Set("ETag", tag)
	out := map[string]string{"name": r.PathValue("name"), "path": rel, "content": string(data), "etag": tag}
	if problem != "" {
		out["problem"] = problem
	}
	writeJSON(w, http.StatusOK, out)
}

// writeFile replaces a file only if it still is what the editor loaded
// (If-Match: its ETag); an edit made while the file changed underneath —
// the assistant saving memory, another tab, an editor on the host — is
// refused with 412, never silently overwritten.
func (p *Panel) writeFile(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	rel, ok := fileRel(name)
	if !ok {
		writeError(w, http.StatusNotFound, "no such file (the panel edits MEMORY.md and the bootstrap files)")
		return
	}
	match := r.Header.Get("If-Match")
	if match == "" {
		writeError(w, http.StatusPreconditionRequired, "If-Match is required: send the ETag of the version you edited")
		return
	}
	var req struct {
		Content string `json:"content"`
	}
	if !decodeJSON(w, r, &req, maxFile) {
		return
	}
	p.edit.Lock()
	defer p.edit.Unlock()
	release, err := p.guard(rel)
	if err != nil {
		p.fail(w, "lock "+rel, err)
		return
	}
	defer release()
	cur, _, _, err := p.read(rel)
	if err != nil {
		p.fail(w, "read "+rel, err)
		return
	}
	if tag := etagOf(cur); tag != match {
		w.Header().Set("ETag", tag)
		writeError(w, http.StatusPreconditionFailed, name+" changed since you opened it (the assistant or another editor wrote it). "+
			"Your text was not saved: copy it, reload the file, and apply your change again.")
		return
	}
	if err := p.writeAtomic(rel, []byte(req.Content)); err != nil {
		p.fail(w, "write "+rel, err)
		return
	}
	tag := etagOf([]byte(req.Content))
	w.Header().Set("ETag", tag)
	writeJSON(w, http.StatusOK, map[string]string{"etag": tag})
}

// guard holds the lock of rel (workspace.Guard) that every writer of the
// file takes — a consolidation in any agent worker, edit_file, the panel of
// another process — so the ETag check and the rename are one step for all of
// them, not only for this process's edits.
func (p *Panel) guard(rel string) (release func(), err error) {
	files, err := workspace.OpenFiles(p.Workspace, nil)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	// The lock's descriptor stays open while it is held; the root may go.
	defer files.Close()
	return files.Guard(rel)
}

// writeAtomic replaces rel with data (workspace.Files.WriteFileAtomic,
// which also replaces a link or a FIFO rather than writing through it),
// creating its directory; a new file is private to the owner.
func (p *Panel) writeAtomic(rel string, data []byte) error {
	files, err := workspace.OpenFiles(p.Workspace, nil)
	if err != nil {
		return fmt.Errorf("open workspace: %w", err)
	}
	defer files.Close()
	if err := files.WriteFileAtomic(rel, data, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", rel, err)
	}
	return nil
}

// ---- cron

func (p *Panel) listCron(w http.ResponseWriter, r *http.Request) {
	jobs := []CronJob{}
	if p.Cron != nil {
		var err error
		if jobs, err = p.Cron.All(); err != nil {
			p.fail(w, "list cron jobs", err)
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"jobs": jobs})
}

func (p *Panel) removeCron(w http.ResponseWriter, r *http.Request) {
	if p.Cron == nil {
		writeError(w, http.StatusNotFound, "no such job")
		return
	}
	ok, err := p.Cron.Remove(r.PathValue("id"))
	p.removed(w, ok, err, "remove the job", "no such job")
}

// removed answers a removal: 204 when there was something to remove, 404
// with notFound when there was not, and a failure to do what.
func (p *Panel) removed(w http.ResponseWriter, ok bool, err error, what, notFound string) {
	switch {
	case err != nil:
		p.fail(w, what, err)
	case !ok:
		writeError(w, http.StatusNotFound, notFound)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// ---- pairing

func (p *Panel) listPairing(w http.ResponseWriter, r *http.Request) {
	st := channels.PairingState{Pending: []channels.PairingRequest{}, Approved: []channels.Approval{}}
	if p.Pairing != nil {
		var err error
		if st, err = p.Pairing.List(); err != nil {
			p.fail(w, "read the pairing store", err)
			return
		}
	}
	writeJSON(w, http.StatusOK, st)
}

func (p *Panel) approve(w http.ResponseWriter, r *http.Request) {
	settle(p, w, r, Pairing.Approve)
}

func (p *Panel) deny(w http.ResponseWriter, r *http.Request) {
	settle(p, w, r, Pairing.Deny)
}

// settle serves approve and deny: it settles the pending code of the path
// with act and answers with what act returns, the approval or the dropped
// request.
func settle[T any](p *Panel, w http.ResponseWriter, r *http.Request, act func(Pairing, string) (T, error)) {
	if p.Pairing == nil {
		writeError(w, http.StatusNotFound, "unknown or expired pairing code")
		return
	}
	v, err := act(p.Pairing, r.PathValue("code"))
	if p.pairingError(w, err) {
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (p *Panel) pairingError(w http.ResponseWriter, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, channels.ErrUnknownCode):
		writeError(w, http.StatusNotFound, "unknown or expired pairing code")
	default:
		p.fail(w, "update the pairing store", err)
	}
	return true
}

func (p *Panel) revoke(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Channel  string `json:"channel"`
		SenderID string `json:"sender_id"`
	}
	if !decodeJSON(w, r, &req, 4<<10) {
		return
	}
	if p.Pairing == nil {
		writeError(w, http.StatusNotFound, "no such approval")
		return
	}
	ok, err := p.Pairing.Revoke(req.Channel, req.SenderID)
	p.removed(w, ok, err, "update the pairing store", "no such approval")
}
