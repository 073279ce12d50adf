// Package cursorkv keeps a channel's cursors document (discord.CursorStore:
// which messages of each chat were handled) in a NATS JetStream KV bucket,
// <PREFIX>_CURSORS, instead of the data dir, so that a channels process of a
// scaled-out deployment (docs/scale-out.md) restarted on another host, without
// its data dir, still catches up the messages sent while it was down.
//
// Layout: one key per channel (e.g. "discord") whose value is the whole JSON
// document the file held. There is exactly one channels process, so every
// save simply replaces the value; it does so with Update on the revision this
// store last read or wrote, and a mismatch — a second channels process
// writing the same key — is logged as an error and then overwritten, as the
// file would have been. On the first start the data dir's file is imported
// once, into a bucket that has no value yet.
//
// Only the daemon constructs a Store; it imports internal/config (and the
// channel packages import nothing of it: they declare the interface).
package cursorkv
