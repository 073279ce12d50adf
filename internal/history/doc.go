// Package history turns a session's stored entries into what one model call
// sees (S-V6), and renders what is stored at levels of detail (S-V5).
//
// At append time, Detail and DetailText write a tool result's or a large user
// input's Live, Summary and Gist renderings once. At call time, Window picks
// the tail of a long session that can matter for a budget, and Project
// repairs the tool-call invariants of S-V3, chooses a rendering per
// observation (newest Live, the next few Summary, older Gist), degrades
// further and cuts whole user turns when the budget is tight, and estimates
// the tokens. Project is a pure function of its inputs: the same session
// always projects to the same bytes, and the newest turns project the same
// however long the session is, which keeps provider prompt caches warm.
// docs/history.md explains the choices and the estimator's measured error.
package history
