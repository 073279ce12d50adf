package daemon

import "net/http"

// modelWriteBuffer is the HTTP/1 write buffer of a model connection. A
// request carries the whole session, tens of KiB (the load benchmark's size:
// docs/BENCHMARKS.md#figures-behind-code-choices); with the default 4 KiB buffer it
// leaves in two writes, the headers and the body's first 4 KiB, then the
// rest, and in one with this.
const modelWriteBuffer = 64 << 10

// modelClient is the HTTP client of the model providers when the caller
// gives none. maxCalls is agents.max_concurrent_turns, the most model calls
// in flight at once.
//
// http.DefaultTransport keeps two idle connections per host, so when more
// than two calls finish together the others' connections are closed and the
// next calls dial again (and, to a real provider, shake hands over TLS
// again). Under load, most calls opened a connection when many turns ran at
// once, fewer with fewer (the counts: docs/BENCHMARKS.md#figures-behind-code-choices);
// the default of 4 is rarely short of idle connections. One idle connection per call
// slot lets each slot reuse its own; the two to spare keep a connection that
// comes back to the pool just after its slot's next call has dialled.
//
// Everything else is DefaultTransport's: the proxy from the environment,
// the dial, TLS and idle timeouts, HTTP/2 where the server offers it (where
// neither setting here matters: one connection carries many calls). The
// client has no Timeout because a stream may run for minutes; each
// provider's timeout bounds its calls.
func modelClient(maxCalls int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = maxCalls + 2
	// MaxIdleConns bounds all hosts together; it must not undercut the
	// per-host bound when max_concurrent_turns is large.
	tr.MaxIdleConns = max(tr.MaxIdleConns, tr.MaxIdleConnsPerHost)
	tr.WriteBufferSize = modelWriteBuffer
	return &http.Client{Transport: tr}
}
