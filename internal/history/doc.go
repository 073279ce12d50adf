// Package history turns a session's stored entries into what one model call
// sees (docs/history.md#projection), and renders what is stored at levels of
// detail (docs/history.md#levels-of-detail).
//
// At append time, Detail and DetailText write a tool result's or a large user
// input's Live, Summary and Gist renderings once. At call time, Project
// repairs the tool-call invariants (docs/history.md#projection) and chooses a
// rendering per observation by budget: everything Live while the request fits
// a high-water mark; past it, one step degrades the oldest first (Live →
// Summary → Gist, then whole turns) down to a low-water mark, and what was
// degraded stays so until the next consolidation. That state is recomputed by
// replaying the session's model calls, so Project stays a pure function of its
// inputs and the prefix of what is sent changes only at a step, which keeps
// provider prompt caches warm; Texts.Project resumes the replay where the last
// call left it. docs/history.md explains the choices and the estimator's
// measured error.
package history
