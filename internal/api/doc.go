// Package api serves an OpenAI-compatible HTTP API to the agent (docs/api.md):
// POST /v1/chat/completions, streamed (server-sent events)
// or not, and GET /v1/models, on the gateway's listener. Any OpenAI client
// (Open WebUI, LibreChat, editors, scripts) then talks to the assistant with
// its memory, tools and sessions; the agent runs its whole tool loop on the
// server and the client sees text.
//
// It is a channel like the others as far as the agent knows: a request
// becomes a bus.InboundMessage on channel "api" with a chat id of its own,
// and the channel manager hands the turn's outbound messages (start, drafts,
// tool hints, final) to the Server, a channels.Receiver, which matches them
// to the waiting request by chat id and turn id. What an OpenAI client needs
// beyond a chat (the request's model, re-sent history, one-off turns, token
// usage) travels in transport-neutral fields of the bus messages.
//
// A turn, once handed to the agent, belongs to the agent: a client that
// goes away does not cancel it, and it is saved in its session; requests of
// one session are answered one at a time, in order. See docs/api.md.
//
// It imports bus, channels (for the Receiver contract), config and llm; only
// internal/daemon constructs it.
package api
