// Package usage is the usage ledger: every model call the daemon makes,
// whoever made it, with its tokens and its price, and the budgets that stop
// new calls when the money is spent (docs/usage.md).
//
// It is a store below the provider router and above the vocabulary: it
// imports llm, history (the token estimate) and atomicfile, and is imported
// by the router (which records every attempt), the channels' transcription
// client, the agent, memory and schedule (which say who is calling, through
// WithCall), and the daemon (which opens it, wires the budget's
// notifications and answers /usage). It never imports the agent or the
// daemon.
//
// # Records
//
// A Record is one attempt of one model call: its time, the session key and
// chat it served, its Origin (turn, api, heartbeat, cron, consolidation,
// subagent, transcription), the route asked for and the provider and model
// that were called, the tokens as the vendor reported them (llm.Usage:
// input, output, cache read, cache write, reasoning), whether they are an
// estimate (the server reported none), the attempt's Outcome (ok, failed,
// retried) and its Cost. A Cost is exact (integer nano-dollars) or
// unpriced: a model without a price counts its tokens and says "unpriced",
// never $0, and a sum with an unpriced part is unpriced too (Cost.Known).
//
// The caller is carried in the context: WithCall(ctx, Call{Origin, Session,
// Chat}) at the top of a turn, a heartbeat tick, a cron job, a consolidation
// or a transcription; the router reads it with CallFrom when it records. A
// call without one is recorded with origin "unknown", so a caller that
// forgot is visible in /usage rather than missing from it.
//
// # The ledger
//
// Ledger (Open) keeps the records in the daemon's data dir, outside the
// workspace, one JSONL file per local day (detail-YYYY-MM-DD.jsonl),
// appended with one write per record; reading drops a torn last line.
// Records are not fsync'd one by one: Run syncs the open file every
// Options.SyncEvery [1s] and Close syncs it, so a crash of the process loses
// nothing and a crash of the machine loses at most that interval.
// Everything is also summed in memory per local day and per (chat, origin,
// provider/model); when a day ends its sums are appended to days.jsonl,
// so a start reads one line per past day and only today's detail, and a
// query over a year adds up 365 small maps, never a year of records. Detail
// files older than Options.Retention [90 days] are deleted; their days stay
// in days.jsonl. Days are local days of Options.Location (budget.timezone).
//
// The Recorder and Reader interfaces are what the router, the budget and
// the surfaces use, so that the NATS bus can put one ledger behind them for
// every process (usagejs).
//
// # Queries
//
// Query sums the days of a Period (Today, Week, Month, Days(n): local days
// of the ledger's location), optionally grouped By chat, model or origin,
// optionally per day (for the panel's chart). Report.Total holds calls,
// tokens and cost.
//
// # Prices
//
// A PriceTable maps a route model ("openai/gpt-4.1") to a Price in USD per
// million tokens (input, output, cache read, cache write). DefaultPrices are
// the vendors' list prices as of PricesAsOf; the configuration's prices:
// entries override them one model at a time. The ledger prices each record
// when it is written.
//
// # Budgets
//
// A Budget holds daily and monthly limits in USD for the whole daemon, per
// chat and per origin (Limits). Check is asked before a new model call (a
// turn, a heartbeat tick, a consolidation, a transcription, a subagent
// run): it answers Allow, Stop (with the sentence the chat reads: what was
// spent, when it resets, where to look) or Reroute (to the configured
// cheaper route). A call that Check allowed marks its context (Admitted), so
// the calls of a running turn are never stopped halfway: a turn already
// running finishes. Since each turn is admitted against the spend recorded
// so far, and the ledger adds a call's cost before the call returns,
// concurrent chats overshoot a limit by at most the turns in flight. When
// the spend first passes WarnAt of a limit, Notify is called once for that
// limit and period (the daemon tells the owner in their chat). Lift lets
// the whole daemon spend past its limits until the end of the local day.
// Warnings and lifts are kept in budget.json beside the ledger, so a restart
// neither repeats a warning nor forgets a lift.
package usage
