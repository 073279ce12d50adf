package discordfake

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// replayLimit bounds the events a session keeps for RESUME; a resume from
// further back gets op 9, as a session Discord has forgotten would.
const replayLimit = 1000

// session is one gateway session (READY ... until invalidated). It survives
// its connection so a client can RESUME and get the events it missed.
type session struct {
	id        string
	intents   int
	seq       int64
	log       []event
	conn      *conn
	resumable bool
}

type event struct {
	seq   int64
	frame []byte
}

// conn is one websocket connection. Frames are written by its own writer
// goroutine, in the order they were queued under Server.mu.
type conn struct {
	ws *websocket.Conn
	// out is closed by hangUp once dead is set; enqueue checks dead under
	// Server.mu, so nothing sends on a closed channel.
	out        chan frame
	done       chan struct{} // closed to stop the writer at once
	doneOnce   sync.Once
	writerDone chan struct{}
	sess       *session
	dead       bool // guarded by Server.mu
	// closing: the server sent a close frame, so the client's close frame
	// is the handshake's echo, not a request to end the session.
	closing bool // guarded by Server.mu
	// blackholed: a zombie connection; frames in either direction are lost.
	blackholed bool // guarded by Server.mu
}

type frame struct {
	data      []byte
	closeCode int // non-zero: send a close frame with this code, then hang up
	reason    string
}

func (c *conn) finish() { c.doneOnce.Do(func() { close(c.done) }) }

// drop hangs up without a close frame, like a dead TCP path.
func (c *conn) drop() {
	c.finish()
	_ = c.ws.NetConn().Close()
}

// handleGateway serves one websocket connection.
func (s *Server) handleGateway(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("compress") != "" {
		http.Error(w, "transport compression is not supported by the fake", http.StatusBadRequest)
		return
	}
	ws, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		s.t.Logf("discordfake: gateway upgrade: %v", err) // Upgrade answered with an HTTP error
		return
	}
	c := &conn{ws: ws, out: make(chan frame, 4096), done: make(chan struct{}), writerDone: make(chan struct{})}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = ws.NetConn().Close()
		return
	}
	s.conns[c] = struct{}{}
	s.stats.Connections++
	s.wg.Add(2) // this handler and its writer
	s.notify()
	s.mu.Unlock()
	defer s.wg.Done()
	go func() {
		defer s.wg.Done()
		defer close(c.writerDone)
		s.writer(c)
	}()
	defer s.hangUp(c)

	if v := q.Get("v"); v != "9" && v != "10" {
		s.closeConn(c, CloseInvalidAPIVersion, "Invalid API version")
		return
	}
	if enc := q.Get("encoding"); enc != "" && enc != "json" {
		s.closeConn(c, CloseDecodeError, "Error while decoding payload.")
		return
	}
	s.mu.Lock()
	s.send(c, opHello, map[string]any{"heartbeat_interval": s.opts.HeartbeatInterval.Milliseconds()})
	s.mu.Unlock()
	s.readLoop(c)
}

func (s *Server) readLoop(c *conn) {
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			if ce := (*websocket.CloseError)(nil); errors.As(err, &ce) {
				s.clientClosed(c, ce.Code)
			}
			return
		}
		s.mu.Lock()
		lost := c.blackholed
		s.mu.Unlock()
		if lost {
			continue
		}
		var p payload
		if err := json.Unmarshal(data, &p); err != nil {
			s.closeConn(c, CloseDecodeError, "Error while decoding payload.")
			return
		}
		s.mu.Lock()
		keep := s.handleOp(c, p)
		s.mu.Unlock()
		if !keep {
			return
		}
	}
}

// handleOp answers one client frame; it reports false when the connection
// was closed. Callers hold s.mu.
func (s *Server) handleOp(c *conn, p payload) bool {
	switch p.Op {
	case opHeartbeat:
		s.stats.Heartbeats++
		s.send(c, opHeartbeatACK, nil)
		s.notify()
		return true
	case opIdentify:
		return s.identify(c, p.D)
	case opResume:
		return s.resume(c, p.D)
	case 3, 4, 8: // presence update, voice state, request guild members
		if c.sess == nil {
			return s.closeLocked(c, CloseNotAuthenticated, "Not authenticated.")
		}
		return true
	default:
		return s.closeLocked(c, CloseUnknownOpcode, "Unknown opcode.")
	}
}

func (s *Server) identify(c *conn, raw json.RawMessage) bool {
	if c.sess != nil {
		return s.closeLocked(c, CloseAlreadyAuthenticated, "Already authenticated.")
	}
	var d identifyData
	if err := json.Unmarshal(raw, &d); err != nil {
		return s.closeLocked(c, CloseDecodeError, "Error while decoding payload.")
	}
	if strings.TrimPrefix(d.Token, "Bot ") != s.opts.Token {
		return s.closeLocked(c, CloseAuthenticationFailed, "Authentication failed.")
	}
	if d.Intents == nil || *d.Intents&^knownIntents != 0 {
		return s.closeLocked(c, CloseInvalidIntents, "Invalid intent(s).")
	}
	if s.opts.DisallowMessageContent && *d.Intents&IntentMessageContent != 0 {
		return s.closeLocked(c, CloseDisallowedIntents, "Disallowed intent(s).")
	}
	ss := &session{id: "session-" + s.newID(), intents: *d.Intents, conn: c, resumable: true}
	s.sessions[ss.id] = ss
	c.sess = ss
	s.stats.Identifies++
	s.stats.IdentifyCompress = d.Compress
	s.stats.Intents = *d.Intents
	unavailable := make([]map[string]any, 0, len(s.guildIDs))
	for _, id := range s.guildIDs {
		unavailable = append(unavailable, map[string]any{"id": id, "unavailable": true})
	}
	s.dispatchTo(ss, "READY", map[string]any{
		"v": 10, "user": s.bot, "guilds": unavailable, "session_id": ss.id,
		"resume_gateway_url": s.wsBase() + "/resume", "shard": []int{0, 1},
		"application":      map[string]any{"id": s.appID, "flags": 0},
		"private_channels": []any{}, "relationships": []any{},
	})
	if ss.intents&IntentGuilds != 0 {
		for _, id := range s.guildIDs {
			s.dispatchTo(ss, "GUILD_CREATE", s.guildCreate(s.guilds[id]))
		}
	}
	s.notify()
	return true
}

func (s *Server) resume(c *conn, raw json.RawMessage) bool {
	if c.sess != nil {
		return s.closeLocked(c, CloseAlreadyAuthenticated, "Already authenticated.")
	}
	var d resumeData
	if err := json.Unmarshal(raw, &d); err != nil {
		return s.closeLocked(c, CloseDecodeError, "Error while decoding payload.")
	}
	if strings.TrimPrefix(d.Token, "Bot ") != s.opts.Token {
		return s.closeLocked(c, CloseAuthenticationFailed, "Authentication failed.")
	}
	ss, ok := s.sessions[d.SessionID]
	if ok && d.Seq > ss.seq {
		return s.closeLocked(c, CloseInvalidSeq, "Invalid seq.")
	}
	if !ok || !ss.resumable || (len(ss.log) > 0 && d.Seq < ss.log[0].seq-1) {
		s.stats.InvalidSessions++
		s.send(c, opInvalidSession, false)
		s.notify()
		return true
	}
	if old := ss.conn; old != nil {
		// The client came back on a new connection; the old one is a zombie.
		old.sess = nil
		old.dead = true
		old.drop()
	}
	ss.conn = c
	c.sess = ss
	for _, e := range ss.log {
		if e.seq > d.Seq {
			s.enqueue(c, frame{data: e.frame})
		}
	}
	s.dispatchTo(ss, "RESUMED", nil)
	s.stats.Resumes++
	s.notify()
	return true
}

// dispatch sends an event to every resumable session whose intents include
// need (need 0: always). build renders the event for a session's intents.
// Sessions without a live connection buffer it for RESUME. Callers hold s.mu.
func (s *Server) dispatch(t string, build func(intents int) any, need int) {
	for _, ss := range s.sessions {
		if !ss.resumable || (need != 0 && ss.intents&need == 0) {
			continue
		}
		s.dispatchTo(ss, t, build(ss.intents))
	}
}

func (s *Server) dispatchTo(ss *session, t string, d any) {
	ss.seq++
	seq := ss.seq
	data, err := json.Marshal(map[string]any{"op": opDispatch, "d": d, "s": seq, "t": t})
	if err != nil {
		s.t.Errorf("discordfake: marshal %s: %v", t, err)
		return
	}
	ss.log = append(ss.log, event{seq: seq, frame: data})
	if len(ss.log) > replayLimit {
		ss.log = ss.log[len(ss.log)-replayLimit:]
	}
	if ss.conn != nil {
		s.enqueue(ss.conn, frame{data: data})
	}
}

// send queues a non-dispatch frame. Callers hold s.mu.
func (s *Server) send(c *conn, op int, d any) {
	data, err := json.Marshal(map[string]any{"op": op, "d": d, "s": nil, "t": nil})
	if err != nil {
		s.t.Errorf("discordfake: marshal op %d: %v", op, err)
		return
	}
	s.enqueue(c, frame{data: data})
}

// enqueue hands a frame to the connection's writer. A client too slow to
// drain thousands of frames is hung up on. Callers hold s.mu.
func (s *Server) enqueue(c *conn, f frame) {
	if c.dead || c.blackholed {
		return
	}
	select {
	case c.out <- f:
	default:
		s.t.Logf("discordfake: gateway client too slow, hanging up")
		s.detach(c)
		c.drop()
	}
}

func (s *Server) writer(c *conn) {
	for {
		select {
		case <-c.done:
			return
		case f, ok := <-c.out:
			if !ok {
				return
			}
			_ = c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if f.closeCode != 0 {
				_ = c.ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(f.closeCode, f.reason))
				c.drop()
				return
			}
			if err := c.ws.WriteMessage(websocket.TextMessage, f.data); err != nil {
				c.drop()
				return
			}
		}
	}
}

// closeLocked sends a close frame after the frames already queued and
// detaches the connection. It returns false for handleOp. Callers hold s.mu.
func (s *Server) closeLocked(c *conn, code int, reason string) bool {
	c.closing = true
	s.enqueue(c, frame{closeCode: code, reason: reason})
	s.detach(c)
	if ss := c.sess; ss != nil && fatalClose(code) {
		ss.resumable = false
	}
	s.notify()
	return false
}

func (s *Server) closeConn(c *conn, code int, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLocked(c, code, reason)
}

// detach marks a connection dead and frees its session for RESUME.
// Callers hold s.mu.
func (s *Server) detach(c *conn) {
	c.dead = true
	if c.sess != nil && c.sess.conn == c {
		c.sess.conn = nil
	}
}

// clientClosed records a close frame from the client. A client closing with
// 1000 or 1001 ends the session (Discord will not resume it), unless it was
// answering the server's own close.
func (s *Server) clientClosed(c *conn, code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.blackholed {
		return // it never arrived
	}
	s.stats.CloseCodes = append(s.stats.CloseCodes, code)
	if c.sess != nil && !c.closing && (code == websocket.CloseNormalClosure || code == websocket.CloseGoingAway) {
		c.sess.resumable = false
	}
	s.notify()
}

// hangUp runs when the read loop ends: the connection is gone. The writer
// flushes what is queued (a close frame, say) and exits; its writes are
// bounded by the write deadline.
func (s *Server) hangUp(c *conn) {
	s.mu.Lock()
	s.detach(c)
	delete(s.conns, c)
	close(c.out)
	s.notify()
	s.mu.Unlock()
	<-c.writerDone
	c.finish()
	_ = c.ws.Close()
}

func fatalClose(code int) bool {
	switch code {
	case CloseAuthenticationFailed, CloseInvalidSeq, CloseSessionTimedOut, CloseInvalidAPIVersion,
		CloseInvalidIntents, CloseDisallowedIntents:
		return true
	}
	return false
}

func (s *Server) wsBase() string { return "ws" + strings.TrimPrefix(s.http.URL, "http") }

func (s *Server) wsURL() string { return s.wsBase() + "/gateway" }

func (s *Server) guildCreate(g *guild) map[string]any {
	var channels, threads []Channel
	for _, id := range g.channelIDs {
		c := *s.channels[id]
		if c.Type == ChannelPublicThread || c.Type == ChannelPrivateThread {
			threads = append(threads, c)
		} else {
			channels = append(channels, c)
		}
	}
	members := make([]Member, 0, len(g.members))
	for _, m := range g.members {
		members = append(members, *m)
	}
	return map[string]any{
		"id": g.id, "name": g.name, "unavailable": false, "large": false, "member_count": len(g.members),
		"joined_at": timestamp(time.Now()), "owner_id": s.bot.ID, "roles": g.roles,
		"channels": nonNil(channels), "threads": nonNil(threads), "members": members,
		"emojis": []any{}, "stickers": []any{}, "features": []any{}, "voice_states": []any{}, "presences": []any{},
	}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// DropConnections hangs up every gateway connection without a close frame,
// like a network failure. Sessions stay resumable.
func (s *Server) DropConnections() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		s.detach(c)
		c.drop()
	}
	s.notify()
}

// Blackhole turns every live connection into a zombie: the TCP connection
// stays up but nothing gets through either way (no heartbeat ACKs, no
// events, the client's close frame never arrives), as on a dead network
// path. Dispatches meanwhile are buffered for RESUME. The client must notice
// the missing ACKs and reconnect.
func (s *Server) Blackhole() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.blackholed = true
		s.detach(c)
	}
	s.notify()
}

// Reconnect sends op 7 RECONNECT on every live connection; the client is
// expected to reconnect and RESUME.
func (s *Server) Reconnect() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.sess != nil {
			s.send(c, opReconnect, nil)
		}
	}
}

// InvalidateSessions sends op 9 INVALID_SESSION with d=resumable on every
// live connection. When not resumable the sessions are forgotten, so the
// client must IDENTIFY again.
func (s *Server) InvalidateSessions(resumable bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.sess == nil {
			continue
		}
		// The connection leaves its session either way: the client may
		// IDENTIFY on it, or RESUME when d is true.
		c.sess.resumable = resumable
		c.sess.conn = nil
		c.sess = nil
		s.stats.InvalidSessions++
		s.send(c, opInvalidSession, resumable)
	}
	s.notify()
}

// CloseConnections closes every gateway connection with a close code. Codes
// Discord documents as not resumable end the sessions.
func (s *Server) CloseConnections(code int, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		s.closeLocked(c, code, reason)
	}
}

// RequestHeartbeat sends op 1 on every live connection; the client must
// answer with a heartbeat at once.
func (s *Server) RequestHeartbeat() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		s.send(c, opHeartbeat, nil)
	}
}
