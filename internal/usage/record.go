package usage

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// Origin says who made a model call.
type Origin string

// The origins. OriginUnknown marks a call whose caller did not say (see
// WithCall); it should never appear, and shows in /usage when it does.
const (
	OriginTurn          Origin = "turn"
	OriginAPI           Origin = "api"
	OriginHeartbeat     Origin = "heartbeat"
	OriginCron          Origin = "cron"
	OriginConsolidation Origin = "consolidation"
	OriginSubagent      Origin = "subagent"
	OriginTranscription Origin = "transcription"
	OriginUnknown       Origin = "unknown"
)

// Origins lists every origin a caller may set, in the order /usage shows
// them.
var Origins = []Origin{OriginTurn, OriginAPI, OriginHeartbeat, OriginCron, OriginConsolidation, OriginSubagent, OriginTranscription}

// Valid reports whether o is one of Origins.
func (o Origin) Valid() bool {
	for _, v := range Origins {
		if o == v {
			return true
		}
	}
	return false
}

// Outcome is how one attempt of a call ended.
type Outcome string

const (
	// OutcomeOK: the attempt answered.
	OutcomeOK Outcome = "ok"
	// OutcomeRetried: the attempt failed and the router tried again (the
	// same route or a fallback).
	OutcomeRetried Outcome = "retried"
	// OutcomeFailed: the attempt failed and was the call's last.
	OutcomeFailed Outcome = "failed"
)

// Call is who is calling, carried in the context from the top of the work
// (a turn, a heartbeat tick, a job) down to the router.
type Call struct {
	Origin Origin
	// Session is the session key the call serves ("" for none).
	Session string
	// Chat is "channel:chat_id" of the chat the call serves, for per-chat
	// limits and /usage ("" for none).
	Chat string
	// Admitted is set by Budget.Admit: the work was let through, so its
	// later calls are not checked again (a running turn finishes).
	Admitted bool
	// Reroute is the cheaper route an admitted work's calls go to
	// (Policy.Reroute at a limit), "" for the one asked for.
	Reroute string
}

// ChatOf is the chat of a session key: its first two parts
// ("telegram:42:topic:7" → "telegram:42"; "api:webui:abc" → "api:webui").
func ChatOf(sessionKey string) string {
	first := strings.IndexByte(sessionKey, ':')
	if first < 0 {
		return sessionKey
	}
	if second := strings.IndexByte(sessionKey[first+1:], ':'); second >= 0 {
		return sessionKey[:first+1+second]
	}
	return sessionKey
}

type callKey struct{}

// WithCall returns ctx carrying c.
func WithCall(ctx context.Context, c Call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// CallFrom returns the Call ctx carries; without one, Origin is
// OriginUnknown and ok is false.
func CallFrom(ctx context.Context) (c Call, ok bool) {
	c, ok = ctx.Value(callKey{}).(Call)
	if !ok {
		c.Origin = OriginUnknown
	}
	return c, ok
}

// Record is one attempt of one model call.
type Record struct {
	Time    time.Time `json:"time"`
	Session string    `json:"session,omitempty"`
	Chat    string    `json:"chat,omitempty"`
	Origin  Origin    `json:"origin"`
	// Route is what was asked for (a route name or "provider/model").
	Route string `json:"route,omitempty"`
	// Provider and Model are what was called (providers.<name>, the
	// vendor's model id).
	Provider string `json:"provider"`
	Model    string `json:"model"`
	// Tokens are as the vendor reported them, or an estimate.
	Tokens llm.Usage `json:"tokens,omitzero"`
	// Estimated says the server reported no usage and Tokens were
	// estimated (Estimate).
	Estimated bool `json:"estimated,omitempty"`
	// AudioSeconds is the length of a transcribed recording, for models
	// billed by the minute.
	AudioSeconds float64 `json:"audio_seconds,omitempty"`
	Outcome      Outcome `json:"outcome"`
	// Cost is filled by the ledger from its price table when written.
	Cost Cost `json:"cost"`
	// Worker and Seq place a record on the NATS bus (usagejs): the
	// process that made the call and the record's sequence in the shared
	// stream; empty and 0 in a single process.
	Worker string `json:"worker,omitempty"`
	Seq    uint64 `json:"seq,omitempty"`
}

// ModelKey is "provider/model", the key of the price table and of /usage's
// model groups.
func (r Record) ModelKey() string { return r.Provider + "/" + r.Model }

// Cost is an amount of US dollars, exact to the nano-dollar, or unpriced.
// The zero Cost is $0, known. Sums of costs with an unpriced part are
// unpriced, and keep the priced part (PricedUSD) for who wants to show it.
type Cost struct {
	nanos int64
	// unpriced counts the records without a price inside this cost.
	unpriced int64
}

// Unpriced is the cost of a call whose model has no price.
var Unpriced = Cost{unpriced: 1}

// USD is a known cost of d dollars.
func USD(d float64) Cost { return Cost{nanos: int64(math.Round(d * 1e9))} }

// Nanos is a known cost of n nano-dollars.
func Nanos(n int64) Cost { return Cost{nanos: n} }

// Known reports whether every part of the cost has a price.
func (c Cost) Known() bool { return c.unpriced == 0 }

// UnpricedCalls is how many records without a price the cost sums.
func (c Cost) UnpricedCalls() int64 { return c.unpriced }

// PricedUSD is the priced part in dollars (all of it when Known).
func (c Cost) PricedUSD() float64 { return float64(c.nanos) / 1e9 }

// PricedNanos is the priced part in nano-dollars.
func (c Cost) PricedNanos() int64 { return c.nanos }

// Add returns c + o.
func (c Cost) Add(o Cost) Cost {
	return Cost{nanos: c.nanos + o.nanos, unpriced: c.unpriced + o.unpriced}
}

// String is "$1.23" (at least two decimals, up to four for small sums) or
// "unpriced".
func (c Cost) String() string {
	if !c.Known() {
		return "unpriced"
	}
	return FormatUSD(c.PricedUSD())
}

// FormatUSD writes d dollars as "$2", "$0.0042", "$12.35".
func FormatUSD(d float64) string {
	switch {
	case d == math.Trunc(d):
		return "$" + strconv.FormatFloat(d, 'f', 0, 64)
	case math.Abs(d) < 0.01:
		return "$" + strconv.FormatFloat(d, 'f', 4, 64)
	}
	return "$" + strconv.FormatFloat(d, 'f', 2, 64)
}

// costWire is Cost on disk and on the wire: {"nanos":N} or
// {"nanos":N,"unpriced":K}.
type costWire struct {
	Nanos    int64 `json:"nanos"`
	Unpriced int64 `json:"unpriced,omitempty"`
}

// MarshalJSON writes the exact form (costWire); surfaces that show a
// dollar number or null use Cost.JSONUSD.
func (c Cost) MarshalJSON() ([]byte, error) {
	return json.Marshal(costWire{Nanos: c.nanos, Unpriced: c.unpriced})
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (c *Cost) UnmarshalJSON(b []byte) error {
	var w costWire
	if err := json.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("cost: %w", err)
	}
	*c = Cost{nanos: w.Nanos, unpriced: w.Unpriced}
	return nil
}

// JSONUSD is the cost for a surface's JSON: the dollars as a number, or nil
// (null) when any part is unpriced (the CLI's contract).
func (c Cost) JSONUSD() *float64 {
	if !c.Known() {
		return nil
	}
	d := c.PricedUSD()
	return &d
}
