// Package web is the browser surface of the gateway (docs/web.md): a chat
// page whose conversations are sessions of the "web" channel (web:<id>), and
// a control panel, served on gateway.listen from files embedded in the
// binary.
//
// The page talks to the gateway over a small JSON API and one Server-Sent
// Events stream per open conversation. SSE rather than a WebSocket: replies
// flow one way (sending is a plain POST that carries the CSRF token), the
// browser's EventSource reconnects on its own, it is ordinary HTTP that every
// reverse proxy passes and that the session cookie and the origin checks
// already cover, and it needs no library on either side. Every (re)connect
// starts with a "hello" that carries the conversation from the session plus
// the turn in flight, so a page that slept or lost the network catches up
// without losing or repeating a reply.
//
// Access is closed by default: the daemon serves the page on loopback only
// unless channels.web.allow_remote is set; every API call but login needs the
// session cookie (HttpOnly, SameSite=Strict, Secure on TLS), every state
// change a CSRF token and a same-origin request, logins are rate-limited and
// compared in constant time, and a strict Content-Security-Policy keeps model
// output from ever running script. Model Markdown is rendered on the server
// by goldmark, which drops raw HTML and dangerous link schemes.
//
// Only internal/daemon imports this package; it imports the bus, session,
// channels (for the Receiver hook and state files) and the vocabulary below
// them.
package web
