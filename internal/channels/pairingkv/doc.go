// Package pairingkv keeps the pairing store (channels.Pairing) in a NATS
// JetStream KV bucket, <PREFIX>_PAIRING, so that the processes of a
// scaled-out deployment (docs/scale-out.md) and `nanobot pairing` run on any
// host share who may talk to the bot.
//
// Layout: one key per channel and sender, "u.<base64url(channel NUL
// sender)>", whose value is that sender's record — its pending code, its
// approval, or both (a sender revoked and asking again). Every operation of
// the file store touches one sender, so every change is one key updated on
// the revision it was computed from (kv.Update, kv.Create, kv.Delete with
// LastRevision); when another process changed the key meanwhile, the change
// is computed again from the new value. Changes of different senders never
// conflict, and no change is lost. The key "meta.imported" records that the
// file store's entries were imported (Store.Run).
//
// Reads — IsApproved on every inbound message, List, finding a code — use an
// in-memory view of the bucket that a KV watch keeps current, so a change
// made by another process shows up within a round trip and no read waits on
// NATS. A store sees its own changes at once.
//
// Only the daemon and cmd/nanobot construct a Store; it imports
// internal/channels and internal/config.
package pairingkv
