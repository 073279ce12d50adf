// Package schedule is nanobot's proactive side (docs/schedule.md): cron jobs
// that the model creates with the cron tool, and the heartbeat that reads
// HEARTBEAT.md every interval and decides whether its tasks are due.
//
// Neither talks to a chat directly. When a job or a heartbeat run is due,
// they publish an inbound message for the target chat's session on the bus,
// marked in its metadata (MetaSource: SourceCron or SourceHeartbeat), so the
// agent runs an ordinary turn and its reply reaches the chat through the
// channel manager with its retries. Both run as `Run(ctx) error` under the
// daemon, sleep on an injected clock until the next due time, and never poll.
//
// Only internal/daemon imports this package.
package schedule
