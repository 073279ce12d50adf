// Package session stores conversations as append-only JSONL files, one per
// session key, in the sessions directory (agents.sessions_dir, by default
// ~/.nanobot/sessions), outside the workspace the tools work in
// (docs/sessions.md). MoveDir moves an old <workspace>/sessions/ there once at
// start.
//
// A turn's messages reach the disk with one write(2) and one fsync, and the
// file is never re-read or rewritten per turn: recently used sessions stay
// loaded, so appending costs the same for a session of ten messages as for
// one of ten thousand. Metadata (consolidation offset, route, title) is
// appended as small records as well. A crash mid-write leaves at most a torn
// last line, which the next load moves aside with a warning.
//
// The agent reaches the Store through an interface of its own; only the
// daemon constructs it. Log shares the format, and Cache the loaded
// sessions' bookkeeping, with stores that keep the records elsewhere
// (internal/session/jsstore: a JetStream stream). The on-disk format is described in docs/sessions.md.
// It imports internal/llm and internal/filelock (MoveDir's lock) and nothing
// else of this module.
package session
