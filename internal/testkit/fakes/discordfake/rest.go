package discordfake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Routes, as the Go ServeMux patterns the fake registers. Fail and Request
// use them to name an endpoint. {version} is v9 (what discordgo speaks) or
// v10; both behave the same here.
const (
	RouteGateway        = "GET /api/{version}/gateway"
	RouteGatewayBot     = "GET /api/{version}/gateway/bot"
	RouteMe             = "GET /api/{version}/users/@me"
	RouteUser           = "GET /api/{version}/users/{user_id}"
	RouteCreateDM       = "POST /api/{version}/users/@me/channels"
	RouteChannel        = "GET /api/{version}/channels/{channel_id}"
	RouteCreateMessage  = "POST /api/{version}/channels/{channel_id}/messages"
	RouteListMessages   = "GET /api/{version}/channels/{channel_id}/messages"
	RouteEditMessage    = "PATCH /api/{version}/channels/{channel_id}/messages/{message_id}"
	RouteDeleteMessage  = "DELETE /api/{version}/channels/{channel_id}/messages/{message_id}"
	RouteTyping         = "POST /api/{version}/channels/{channel_id}/typing"
	RouteGuildMember    = "GET /api/{version}/guilds/{guild_id}/members/{user_id}"
	RouteCommands       = "PUT /api/{version}/applications/{application_id}/commands"
	RouteAttachment     = "GET /attachments/{attachment_id}/{filename}"
	rateLimitPerBucket  = 5
	rateLimitWindowSecs = 5.0
)

// Failure is a fault injected into the next call of a route.
type Failure struct {
	// Status is the HTTP status to answer (429, 500, 502, 400...).
	Status int
	// RetryAfter (seconds) and Global shape a 429, as Discord sends them.
	RetryAfter float64
	Global     bool
	// Drop performs the call, then hangs up without answering: the client
	// cannot know whether it succeeded (Status is ignored).
	Drop bool
	// ChannelID, when set, limits the failure to calls for that channel.
	ChannelID string
	// Delay holds the call this long before it is answered (a slow CDN or
	// API); with no Status and no Drop the call then succeeds.
	Delay time.Duration
}

// Fail makes the next len(fs) matching calls of route fail, in order.
func (s *Server) Fail(route string, fs ...Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures[route] = append(s.failures[route], fs...)
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	handle := func(route string, auth bool, h func(w http.ResponseWriter, r *http.Request, body []byte)) {
		mux.HandleFunc(route, s.wrap(route, auth, h))
	}
	handle(RouteGateway, false, s.getGateway)
	handle(RouteGatewayBot, true, s.getGatewayBot)
	handle(RouteMe, true, func(w http.ResponseWriter, _ *http.Request, _ []byte) { writeJSON(w, 200, s.bot) })
	handle(RouteUser, true, s.getUser)
	handle(RouteCreateDM, true, s.createDM)
	handle(RouteChannel, true, s.getChannel)
	handle(RouteCreateMessage, true, s.createMessage)
	handle(RouteListMessages, true, s.listMessages)
	handle(RouteEditMessage, true, s.editMessage)
	handle(RouteDeleteMessage, true, s.deleteMessage)
	handle(RouteTyping, true, s.triggerTyping)
	handle(RouteGuildMember, true, s.getMember)
	handle(RouteCommands, true, s.putCommands)
	handle(RouteAttachment, false, s.getAttachment)
	// Interaction callbacks are authorised by the token in the path.
	handle(RouteInteractionCallback, false, s.interactionCallback)
	// Clients add a trailing slash to the discovered URL (discordgo does).
	for _, p := range []string{"GET /gateway", "GET /gateway/{$}", "GET /resume", "GET /resume/{$}"} {
		mux.HandleFunc(p, s.handleGateway)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, apiError{Message: "404: Not Found", Code: 0})
	})
	return mux
}

// wrap checks authentication, records the call, applies injected failures
// and adds Discord's rate-limit headers.
func (s *Server) wrap(route string, auth bool, h func(http.ResponseWriter, *http.Request, []byte)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		var jsonBody []byte
		if err == nil {
			_, _, jsonBody, _ = parseMessageRequest(r.Header.Get("Content-Type"), body)
		}
		rec := &statusRecorder{ResponseWriter: w, status: 200}
		// Recorded before it is handled, so a test that sees the effect
		// (a stored message) also sees the request; the status follows.
		s.mu.Lock()
		idx := len(s.requests)
		s.requests = append(s.requests, Request{Method: r.Method, Route: route, Path: r.URL.Path, Body: jsonBody})
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.requests[idx].Status = rec.status
			s.notify()
			s.mu.Unlock()
		}()
		if v := r.PathValue("version"); v != "" && v != "v9" && v != "v10" {
			writeJSON(rec, http.StatusBadRequest, apiError{Message: "Invalid API version", Code: 50041})
			return
		}
		if auth && r.Header.Get("Authorization") != "Bot "+s.opts.Token {
			writeJSON(rec, http.StatusUnauthorized, apiError{Message: "401: Unauthorized", Code: codeUnauthorized})
			return
		}
		if err != nil {
			writeJSON(rec, http.StatusBadRequest, apiError{Message: "400: Bad Request: " + err.Error(), Code: codeInvalidFormBody})
			return
		}
		s.mu.Lock()
		var f *Failure
		q := s.failures[route]
		for i := range q {
			if q[i].ChannelID == "" || q[i].ChannelID == r.PathValue("channel_id") {
				f = &q[i]
				s.failures[route] = slices.Delete(slices.Clone(q), i, i+1)
				break
			}
		}
		s.mu.Unlock()
		if f != nil && f.Delay > 0 {
			select {
			case <-time.After(f.Delay):
			case <-r.Context().Done():
				return
			}
			if f.Status == 0 && !f.Drop {
				f = nil
			}
		}
		rec.Header().Set("X-RateLimit-Bucket", fmt.Sprintf("%x", len(route)*7919))
		rec.Header().Set("X-RateLimit-Limit", strconv.Itoa(rateLimitPerBucket))
		switch {
		case f == nil:
			setRemaining(rec.Header(), rateLimitPerBucket-1, 1)
			h(rec, r, body)
		case f.Drop:
			h(&discard{header: http.Header{}}, r, body)
			rec.status = 0
			hangUpHTTP(w)
		case f.Status == http.StatusTooManyRequests:
			writeRateLimited(rec, *f)
		default:
			writeJSON(rec, f.Status, apiError{Message: fmt.Sprintf("%d: %s", f.Status, http.StatusText(f.Status)), Code: 0})
		}
	}
}

func setRemaining(h http.Header, remaining int, resetAfter float64) {
	h.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
	h.Set("X-RateLimit-Reset-After", strconv.FormatFloat(resetAfter, 'f', 3, 64))
	reset := float64(time.Now().UnixMilli())/1000 + resetAfter
	h.Set("X-RateLimit-Reset", strconv.FormatFloat(reset, 'f', 3, 64))
}

// writeRateLimited answers a 429 the way Discord does: a JSON body with
// retry_after in (fractional) seconds, Retry-After in whole seconds, and the
// X-RateLimit headers (Global/Scope for a global limit).
func writeRateLimited(w http.ResponseWriter, f Failure) {
	h := w.Header()
	setRemaining(h, 0, f.RetryAfter)
	h.Set("Retry-After", strconv.Itoa(int(f.RetryAfter+0.999)))
	scope := "user"
	if f.Global {
		h.Set("X-RateLimit-Global", "true")
		scope = "global"
	}
	h.Set("X-RateLimit-Scope", scope)
	writeJSON(w, http.StatusTooManyRequests, rateLimitBody{Message: "You are being rate limited.", RetryAfter: f.RetryAfter, Global: f.Global})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

type discard struct{ header http.Header }

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}

func hangUpHTTP(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("discordfake: response writer cannot hijack")
	}
	c, _, err := hj.Hijack()
	if err == nil {
		_ = c.Close()
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func formError(field, code, msg string) apiError {
	errs, _ := json.Marshal(map[string]any{field: map[string]any{"_errors": []map[string]string{{"code": code, "message": msg}}}})
	return apiError{Message: "Invalid Form Body", Code: codeInvalidFormBody, Errors: errs}
}

func (s *Server) getGateway(w http.ResponseWriter, _ *http.Request, _ []byte) {
	writeJSON(w, 200, map[string]any{"url": s.wsURL()})
}

func (s *Server) getGatewayBot(w http.ResponseWriter, _ *http.Request, _ []byte) {
	writeJSON(w, 200, map[string]any{"url": s.wsURL(), "shards": 1, "session_start_limit": map[string]int{
		"total": 1000, "remaining": 999, "reset_after": 14_400_000, "max_concurrency": 1}})
}

func (s *Server) getUser(w http.ResponseWriter, r *http.Request, _ []byte) {
	s.mu.Lock()
	u, ok := s.users[r.PathValue("user_id")]
	s.mu.Unlock()
	if !ok {
		writeJSON(w, 404, apiError{Message: "Unknown User", Code: codeUnknownUser})
		return
	}
	writeJSON(w, 200, u)
}

func (s *Server) createDM(w http.ResponseWriter, _ *http.Request, body []byte) {
	var req struct {
		RecipientID string `json:"recipient_id"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.RecipientID == "" {
		writeJSON(w, 400, formError("recipient_id", "BASE_TYPE_REQUIRED", "This field is required"))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.users[req.RecipientID]
	if !ok || u.Bot {
		writeJSON(w, 400, apiError{Message: "Invalid Recipient(s)", Code: 50033})
		return
	}
	writeJSON(w, 200, *s.dmChannel(u))
}

func (s *Server) getChannel(w http.ResponseWriter, r *http.Request, _ []byte) {
	s.mu.Lock()
	c, ok := s.channels[r.PathValue("channel_id")]
	var cp Channel
	if ok {
		cp = *c
	}
	s.mu.Unlock()
	if !ok {
		writeJSON(w, 404, apiError{Message: "Unknown Channel", Code: codeUnknownChannel})
		return
	}
	writeJSON(w, 200, cp)
}

// listMessages is Get Channel Messages with after or before and limit
// (1–100, default 50): the messages directly after (or before) the id, or
// the newest without either, newest first, as Discord sends them, and
// without guild_id and member, which only gateway events carry. Deleted
// messages are gone.
func (s *Server) listMessages(w http.ResponseWriter, r *http.Request, _ []byte) {
	q := r.URL.Query()
	limit := 50
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			writeJSON(w, 400, apiError{Message: "Invalid Form Body", Code: 50035})
			return
		}
		limit = n
	}
	var after uint64
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeJSON(w, 400, apiError{Message: "Invalid Form Body", Code: 50035})
			return
		}
		after = n
	}
	var before uint64
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || after != 0 {
			writeJSON(w, 400, apiError{Message: "Invalid Form Body", Code: 50035})
			return
		}
		before = n
	}
	if q.Get("around") != "" {
		writeJSON(w, 400, apiError{Message: "discordfake: around is not supported", Code: 50035})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := r.PathValue("channel_id")
	if _, ok := s.channels[id]; !ok {
		writeJSON(w, 404, apiError{Message: "Unknown Channel", Code: codeUnknownChannel})
		return
	}
	if s.noHistory[id] {
		writeJSON(w, 403, apiError{Message: "Missing Access", Code: 50001})
		return
	}
	page := []MessageObject{}
	msgs := s.messages[id] // oldest first
	if after == 0 {
		// before, or the newest: walk from the newest back.
		msgs = slices.Clone(msgs)
		slices.Reverse(msgs)
	}
	for _, m := range msgs {
		n, _ := strconv.ParseUint(m.obj.ID, 10, 64)
		if m.deleted || n <= after || before != 0 && n >= before {
			continue
		}
		obj := m.obj
		obj.GuildID, obj.Member = "", nil
		page = append(page, obj)
		if len(page) == limit {
			break
		}
	}
	if after != 0 {
		slices.Reverse(page)
	}
	writeJSON(w, 200, page)
}

// DenyHistory makes Get Channel Messages answer 403 Missing Access for a
// channel, as when the bot lacks Read Message History.
func (s *Server) DenyHistory(channelID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noHistory[channelID] = true
}

func (s *Server) getMember(w http.ResponseWriter, r *http.Request, _ []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.guilds[r.PathValue("guild_id")]
	if !ok {
		writeJSON(w, 404, apiError{Message: "Unknown Guild", Code: 10004})
		return
	}
	m, ok := g.members[r.PathValue("user_id")]
	if !ok {
		writeJSON(w, 404, apiError{Message: "Unknown Member", Code: codeUnknownMember})
		return
	}
	writeJSON(w, 200, *m)
}

type messageRequest struct {
	Content          *string           `json:"content"`
	AllowedMentions  *AllowedMentions  `json:"allowed_mentions"`
	MessageReference *MessageReference `json:"message_reference"`
	Embeds           []json.RawMessage `json:"embeds"`
	Flags            int               `json:"flags"`
}

// parseMessageRequest reads a JSON or multipart (payload_json + files[n])
// message body; jsonPart is the JSON (the payload_json part for multipart).
func parseMessageRequest(contentType string, body []byte) (req messageRequest, files []File, jsonPart []byte, err error) {
	jsonPart = body
	ct, params, _ := mime.ParseMediaType(contentType)
	if ct == "multipart/form-data" {
		jsonPart = nil
		mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
		for {
			p, perr := mr.NextPart()
			if perr == io.EOF {
				break
			}
			if perr != nil {
				return req, nil, nil, fmt.Errorf("multipart: %w", perr)
			}
			data, rerr := io.ReadAll(io.LimitReader(p, 32<<20))
			if rerr != nil {
				return req, nil, nil, fmt.Errorf("multipart part %q: %w", p.FormName(), rerr)
			}
			switch name := p.FormName(); {
			case name == "payload_json":
				jsonPart = data
			case strings.HasPrefix(name, "files["):
				files = append(files, File{Name: p.FileName(), ContentType: p.Header.Get("Content-Type"), Data: data})
			}
		}
	}
	if len(jsonPart) > 0 {
		if err := json.Unmarshal(jsonPart, &req); err != nil {
			return req, nil, jsonPart, fmt.Errorf("json: %w", err)
		}
	}
	return req, files, jsonPart, nil
}

func (s *Server) createMessage(w http.ResponseWriter, r *http.Request, body []byte) {
	req, files, _, err := parseMessageRequest(r.Header.Get("Content-Type"), body)
	if err != nil {
		writeJSON(w, 400, apiError{Message: "400: Bad Request", Code: codeInvalidFormBody})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channels[r.PathValue("channel_id")]
	if !ok {
		writeJSON(w, 404, apiError{Message: "Unknown Channel", Code: codeUnknownChannel})
		return
	}
	content := ""
	if req.Content != nil {
		content = *req.Content
	}
	switch {
	case content == "" && len(files) == 0 && len(req.Embeds) == 0:
		writeJSON(w, 400, apiError{Message: "Cannot send an empty message", Code: codeEmptyMessage})
		return
	case utf8.RuneCountInString(content) > maxContentLen:
		writeJSON(w, 400, formError("content", "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", maxContentLen)))
		return
	case len(files) > maxAttachmentsPerCall:
		writeJSON(w, 400, formError("files", "BASE_TYPE_MAX_LENGTH", "Must be 10 or fewer in length."))
		return
	}
	m := MessageObject{
		ID: s.newID(), ChannelID: ch.ID, GuildID: ch.GuildID, Author: s.bot, Content: content,
		Timestamp: timestamp(time.Now()), Mentions: []User{}, MentionRoles: []string{},
		Attachments: []Attachment{}, Embeds: nonNil(req.Embeds), Type: MessageTypeDefault, Flags: req.Flags,
	}
	if ref := req.MessageReference; ref != nil {
		target, ok := s.byID[ref.MessageID]
		if !ok || target.obj.ChannelID != ch.ID || target.deleted {
			if ref.FailIfNotExists == nil || *ref.FailIfNotExists {
				writeJSON(w, 400, formError("message_reference", "MESSAGE_REFERENCE_UNKNOWN_MESSAGE", "Unknown message"))
				return
			}
		} else {
			m.Type = MessageTypeReply
			m.MessageReference = &MessageReference{MessageID: target.obj.ID, ChannelID: ch.ID, GuildID: ch.GuildID}
			refObj := target.obj
			refObj.ReferencedMessage = nil
			m.ReferencedMessage = &refObj
		}
	}
	for _, sm := range userMention.FindAllStringSubmatch(content, -1) {
		if u, ok := s.users[sm[1]]; ok {
			m.Mentions = append(m.Mentions, u)
		}
	}
	for _, sm := range roleMention.FindAllStringSubmatch(content, -1) {
		m.MentionRoles = append(m.MentionRoles, sm[1])
	}
	for _, f := range files {
		url := s.addFile(f)
		m.Attachments = append(m.Attachments, Attachment{ID: s.newID(), Filename: f.Name, ContentType: f.ContentType,
			Size: len(f.Data), URL: url, ProxyURL: url})
	}
	st := &stored{obj: m, byBot: true, allowed: req.AllowedMentions, files: files, history: []string{content}}
	s.messages[ch.ID] = append(s.messages[ch.ID], st)
	s.byID[m.ID] = st
	// Discord echoes the bot's own messages on the gateway.
	s.dispatchMessage(m)
	s.notify()
	writeJSON(w, 200, m)
}

func (s *Server) editMessage(w http.ResponseWriter, r *http.Request, body []byte) {
	var req messageRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeJSON(w, 400, apiError{Message: "400: Bad Request", Code: codeInvalidFormBody})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.byID[r.PathValue("message_id")]
	if !ok || st.obj.ChannelID != r.PathValue("channel_id") || st.deleted {
		writeJSON(w, 404, apiError{Message: "Unknown Message", Code: codeUnknownMessage})
		return
	}
	if !st.byBot {
		writeJSON(w, 403, apiError{Message: "Cannot edit a message authored by another user", Code: codeCannotEditOthers})
		return
	}
	if req.Content != nil {
		if utf8.RuneCountInString(*req.Content) > maxContentLen {
			writeJSON(w, 400, formError("content", "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", maxContentLen)))
			return
		}
		if *req.Content == "" && len(st.obj.Attachments) == 0 && len(st.obj.Embeds) == 0 {
			writeJSON(w, 400, apiError{Message: "Cannot send an empty message", Code: codeEmptyMessage})
			return
		}
		st.obj.Content = *req.Content
		st.history = append(st.history, *req.Content)
	}
	if req.AllowedMentions != nil {
		st.allowed = req.AllowedMentions
	}
	edited := timestamp(time.Now())
	st.obj.EditedTimestamp = &edited
	s.dispatch("MESSAGE_UPDATE", func(int) any { return st.obj }, 0)
	s.notify()
	writeJSON(w, 200, st.obj)
}

func (s *Server) deleteMessage(w http.ResponseWriter, r *http.Request, _ []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.byID[r.PathValue("message_id")]
	if !ok || st.obj.ChannelID != r.PathValue("channel_id") || st.deleted {
		writeJSON(w, 404, apiError{Message: "Unknown Message", Code: codeUnknownMessage})
		return
	}
	st.deleted = true
	s.dispatch("MESSAGE_DELETE", func(int) any {
		return map[string]string{"id": st.obj.ID, "channel_id": st.obj.ChannelID, "guild_id": st.obj.GuildID}
	}, 0)
	s.notify()
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) triggerTyping(w http.ResponseWriter, r *http.Request, _ []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := r.PathValue("channel_id")
	if _, ok := s.channels[id]; !ok {
		writeJSON(w, 404, apiError{Message: "Unknown Channel", Code: codeUnknownChannel})
		return
	}
	s.typing[id]++
	s.notify()
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) putCommands(w http.ResponseWriter, r *http.Request, body []byte) {
	if r.PathValue("application_id") != s.appID {
		writeJSON(w, 403, apiError{Message: "Missing Access", Code: 50001})
		return
	}
	var cmds []map[string]any
	if err := json.Unmarshal(body, &cmds); err != nil {
		writeJSON(w, 400, apiError{Message: "400: Bad Request", Code: codeInvalidFormBody})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cmds {
		c["id"] = s.newID()
		c["application_id"] = s.appID
		c["version"] = s.newID()
	}
	s.commands = cmds
	s.notify()
	writeJSON(w, 200, cmds)
}

func (s *Server) getAttachment(w http.ResponseWriter, r *http.Request, _ []byte) {
	s.mu.Lock()
	f, ok := s.files[r.URL.Path]
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	if f.ContentType != "" {
		w.Header().Set("Content-Type", f.ContentType)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(f.Data)))
	_, _ = io.Copy(w, bytes.NewReader(f.Data))
}
