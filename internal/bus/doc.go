// Package bus carries messages between the chat channels and the agent. It is
// a leaf: channels import it to publish what users say, the agent imports it to
// consume those messages and publish replies, and neither imports the other.
//
// Ordering: inbound messages are delivered in the order they were published
// (one queue), so messages of one chat arrive in the order its channel saw
// them. Outbound messages are likewise delivered in publish order; the agent
// publishes one chat's replies from one goroutine at a time, so a chat's
// drafts, statuses and final message stay ordered.
//
// Back-pressure: both queues are bounded. Publish blocks while a queue is full
// until the consumer catches up or the caller's context ends, so a flood of
// inbound messages slows the channel that reads them rather than growing
// memory without bound. After Close, Publish fails with ErrClosed and the
// consumers see the queues drain and end.
package bus
