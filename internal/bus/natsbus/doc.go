// Package natsbus carries the bus over NATS JetStream, so the chat channels
// and any number of agent workers can run as separate processes
// (bus.backend: nats, docs/scale-out.md). Only internal/daemon imports it.
//
// It does not replace the in-process queues: the agent and the channel
// manager keep reading a local *bus.Bus. A Bus here publishes what the
// process produces to JetStream and feeds the local queues from it:
//
//   - inbound messages go to the stream <PREFIX>_IN on one of N partition
//     subjects, chosen by hashing the session key; each partition has one
//     durable consumer with MaxAckPending 1, so one worker at a time holds a
//     chat's next message and a chat's messages are handled in order;
//   - outbound messages (start, drafts, status, final, messages) go to the
//     stream <PREFIX>_OUT in publish order, read by the channels process.
//
// Acknowledgements follow the hops: a channel's InboundMessage.Ack is called
// once the inbound stream stored the message; a worker acknowledges it when
// the agent calls Ack, which the agent does once the turn's final message
// was stored in the outbound stream (that is what OutboundMessage.Delivered
// means to a worker); the channels process acknowledges an outbound message
// when the channel manager calls its Delivered. A worker heartbeats the
// messages it holds; one that dies loses them to another worker after
// bus.nats.ack_wait, and the agent recognises the redelivered message in the
// session (internal/agent/replay.go), so it is answered once.
//
// A Lease elects one process among those that run it, on a key of the KV
// bucket <PREFIX>_LEASE: the daemon's agent processes compete for the
// "scheduler" lease, and the holder runs cron and the heartbeat.
package natsbus
