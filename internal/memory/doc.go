// Package memory folds old conversation into the workspace's long-term
// memory (docs/memory.md): memory/MEMORY.md, the facts injected into every
// system prompt, and memory/HISTORY.md, an append-only log of dated
// paragraphs that is searched, never injected.
//
// A Consolidator sends the older part of a session, together with the
// current MEMORY.md, to the model with a forced save_memory tool call and
// applies the answer: MEMORY.md is replaced atomically when it changed and
// the history entry is appended. Files serialises every update of the two
// files — within the process by a mutex, across processes sharing the
// workspace by the flock of memory/.memory.lock (workspace.Guard) — and
// detects a MEMORY.md changed underneath a running consolidation (by another
// session's consolidation, another worker's, the edit_file tool or the web
// panel), so no update is lost.
//
// Deciding when to consolidate, keeping two consolidations of one session
// apart and recording the session's new offset are the agent's job; this
// package does not know about sessions beyond their messages.
package memory
