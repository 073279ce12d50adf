package usage

import (
	"encoding/json"
	"math"
	"strconv"
	"time"

	segjson "github.com/segmentio/encoding/json"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// appendRecord appends r as one detail line's JSON: byte for byte what
// json.Marshal(r) writes (TestAppendRecordIsMarshal holds it to that), but
// into the ledger's own buffer, without reflection or allocation. Every
// model call writes one, so this is on every turn's path
// (docs/BENCHMARKS.md, Issue 37: CPU per turn).
func appendRecord(b []byte, r Record) ([]byte, error) {
	if y := r.Time.Year(); y < 0 || y > 9999 || math.IsNaN(r.AudioSeconds) || math.IsInf(r.AudioSeconds, 0) {
		// json.Marshal's error says what is wrong.
		_, err := json.Marshal(r)
		return b, err
	}
	b = append(b, `{"time":"`...)
	b = r.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	b = appendField(b, `,"session":`, r.Session, true)
	b = appendField(b, `,"chat":`, r.Chat, true)
	b = appendField(b, `,"origin":`, string(r.Origin), false)
	b = appendField(b, `,"route":`, r.Route, true)
	b = appendField(b, `,"provider":`, r.Provider, false)
	b = appendField(b, `,"model":`, r.Model, false)
	if r.Tokens != (llm.Usage{}) {
		b = append(b, `,"tokens":`...)
		b = appendUsage(b, r.Tokens)
	}
	if r.Estimated {
		b = append(b, `,"estimated":true`...)
	}
	if r.AudioSeconds != 0 {
		b = append(b, `,"audio_seconds":`...)
		b = appendFloat(b, r.AudioSeconds)
	}
	b = appendField(b, `,"outcome":`, string(r.Outcome), false)
	b = append(b, `,"cost":`...)
	b = r.Cost.appendJSON(b)
	b = appendField(b, `,"worker":`, r.Worker, true)
	if r.Seq != 0 {
		b = append(b, `,"seq":`...)
		b = strconv.AppendUint(b, r.Seq, 10)
	}
	return append(b, '}'), nil
}

// appendField appends name and s as a JSON string escaped as
// encoding/json escapes it (HTML characters included); an empty s is left
// out when omitEmpty.
func appendField(b []byte, name, s string, omitEmpty bool) []byte {
	if omitEmpty && s == "" {
		return b
	}
	b = append(b, name...)
	return segjson.AppendEscape(b, s, segjson.EscapeHTML)
}

// appendUsage writes llm.Usage as its json tags say (every field
// omitempty).
func appendUsage(b []byte, u llm.Usage) []byte {
	b = append(b, '{')
	first := true
	for _, f := range [...]struct {
		name string
		n    int
	}{{`"input":`, u.InputTokens}, {`"output":`, u.OutputTokens}, {`"cache_read":`, u.CacheReadTokens},
		{`"cache_write":`, u.CacheWriteTokens}, {`"reasoning":`, u.ReasoningTokens}} {
		if f.n == 0 {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, f.name...)
		b = strconv.AppendInt(b, int64(f.n), 10)
	}
	return append(b, '}')
}

// appendFloat writes f as encoding/json does: the shortest decimal, in
// exponent form only below 1e-6 or from 1e21 on, with a one-digit negative
// exponent ("1e-7", not "1e-07").
func appendFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendJSON writes the exact form MarshalJSON writes (costWire).
func (c Cost) appendJSON(b []byte) []byte {
	b = append(b, `{"nanos":`...)
	b = strconv.AppendInt(b, c.nanos, 10)
	if c.unpriced != 0 {
		b = append(b, `,"unpriced":`...)
		b = strconv.AppendInt(b, c.unpriced, 10)
	}
	return append(b, '}')
}
