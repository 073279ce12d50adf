// Package mcp brings the tools of Model Context Protocol servers to the
// agent (docs/mcp.md): for every server under tools.mcp_servers it keeps a
// client connection (a stdio child process or a streamable HTTP endpoint,
// through the official Go SDK) and registers each of the server's tools in the
// agent's tool registry as mcp_<server>_<tool>, with a name and a parameter
// schema every provider accepts.
//
// One Manager owns all servers; the daemon runs its Run under its errgroup.
// Servers connect in the background, each on its own: a slow or broken
// server never delays startup or the others. A connection that breaks is
// made again with exponential backoff (on an injectable clock); tools stay
// registered meanwhile and their calls say the server is reconnecting. The
// tool list follows the server's list-changed notifications. When Run's
// context ends every connection is closed, stdio servers are stopped with
// their whole process group and reaped, and the tools are unregistered.
//
// Only the daemon imports this package.
package mcp
