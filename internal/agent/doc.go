// Package agent is the assistant's brain: it consumes inbound messages from
// the bus, serves each session in order (one turn at a time per session,
// sessions in parallel under a global cap), builds the system prompt from the
// workspace, projects the session history into a model request, runs the
// model-and-tools loop, persists the turn and publishes the reply. After a
// turn it folds the older part of a long session into long-term memory in
// the background (memory.go), and the spawn tool runs background subagents
// whose results come back as system messages (subagent.go).
//
// It reaches the model, the session store and the tools only through the
// small interfaces declared in agent.go, so each can be replaced in tests.
package agent
