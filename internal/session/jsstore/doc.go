// Package jsstore keeps sessions in a NATS JetStream stream instead of
// JSONL files, so the agent workers of a scaled-out deployment
// (docs/scale-out.md) share sessions without a shared volume and cannot
// append after a stale tail.
//
// The stream <PREFIX>_SESSIONS holds one subject per session key,
// <prefix>.session.<base64url(key)>, and one stream message per write: the
// bytes are exactly the JSONL lines the file store (internal/session) would
// append for that write — a header when the conversation starts, the
// messages of an Append, a meta record — plus an "archive" record that ends
// a conversation (the archived records stay in the stream, readable). Every
// write is published with Nats-Expected-Last-Subject-Sequence set to the
// last record this store read, the append-only rule of the file store made
// a server-side check: a write based on a stale view is refused.
//
// A refused write is rebased by the store when the records that came in
// between commute with it (messages and meta records do; two appends of
// messages, two meta records, or anything and an archive do not): it reads
// them, encodes its write again and publishes it after them. Otherwise it
// returns session.ErrConflict having read the session again, and the
// caller decides (see Store.Append). Loaded sessions are kept in a
// session.Cache, bounded as the file store's. Only the daemon constructs a
// Store; it imports internal/session, internal/llm, internal/config and
// internal/bus/natsbus (the connection it is given).
package jsstore
