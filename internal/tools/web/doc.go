// Package web holds the model's two tools for the internet
// (docs/web-tools.md): web_search (DuckDuckGo's HTML page without a key, or
// the Brave Search API with one) and web_fetch (one http or https page, turned
// into Markdown).
//
// web_fetch runs on the model's say-so with URLs anyone can put in front of
// it, so it only reaches the public internet: its dialer checks the address
// it is about to connect to, after DNS resolution and for every redirect,
// and refuses loopback, private, link-local (cloud metadata), CGNAT and
// other non-public ranges. Because the check is on the resolved address of
// each connection, a DNS answer that changes between a check and the
// connect (DNS rebinding) cannot slip past it.
//
// internal/daemon registers both tools; nothing else imports this package.
package web
