package session

import (
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/nanobot-go/nanobot/internal/llm"
)

// appendPlain appends the JSON encoding/json writes for m (HTML escaping
// off, as the encoder's), without reflection, for a message readBack
// answers for: text and thinking parts, no tool call, result, image or
// file. ok is false for any other message, or a time encoding/json would
// refuse, and then b is returned as it was. Writing a turn's two messages
// through encoding/json was most of what appending them cost besides the
// write itself. TestAppendPlainIsEncodingJSON holds the bytes to
// encoding/json's; TestReadBackKnowsEveryField catches a new field.
func appendPlain(b []byte, m *llm.Message) ([]byte, bool) {
	if !plainParts(m.Parts) {
		return b, false
	}
	if !m.Time.IsZero() {
		_, offset := m.Time.Zone()
		if y := m.Time.Year(); y < 0 || y > 9999 || offset <= -24*3600 || offset >= 24*3600 {
			return b, false // encoding/json refuses it; let it say so
		}
	}
	b = append(b, `{"role":`...)
	b = appendJSONString(b, string(m.Role))
	b = append(b, `,"parts":`...)
	if m.Parts == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range m.Parts {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendPart(b, &m.Parts[i])
		}
		b = append(b, ']')
	}
	if !m.Time.IsZero() {
		b = append(b, `,"time":"`...)
		b = m.Time.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	if m.Meta != nil {
		b = append(b, `,"meta":`...)
		b = appendMeta(b, m.Meta)
	}
	return append(b, '}'), true
}

// plainParts reports whether parts are only text and thinking: no tool
// call, result, image or file, whose encoding and reading back the
// plain paths do not cover.
func plainParts(parts []llm.Part) bool {
	for i := range parts {
		p := &parts[i]
		if p.Call != nil || p.Result != nil || p.Image != nil || p.File != nil {
			return false
		}
	}
	return true
}

// plainSize is about the size of m's encoding, escapes aside: room to
// reserve before appendPlain.
func plainSize(m *llm.Message) int {
	n := 160 // field names, the time
	eachString(m, func(s *string) { n += len(*s) + 16 })
	return n
}

func appendPart(b []byte, p *llm.Part) []byte {
	b = append(b, `{"kind":`...)
	b = appendJSONString(b, string(p.Kind))
	b = appendStringField(b, "text", p.Text)
	b = appendStringField(b, "summary", p.Summary)
	b = appendStringField(b, "gist", p.Gist)
	b = appendStringField(b, "signature", p.Signature)
	if p.Redacted {
		b = append(b, `,"redacted":true`...)
	}
	return append(b, '}')
}

func appendMeta(b []byte, m *llm.Meta) []byte {
	mark := len(b)
	b = append(b, '{')
	field := func(name string) {
		if len(b) > mark+1 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, `":`...)
	}
	str := func(name, v string) {
		if v != "" {
			field(name)
			b = appendJSONString(b, v)
		}
	}
	str("route", m.Route)
	str("provider", m.Provider)
	str("api", m.API)
	str("model", m.Model)
	if m.Usage != (llm.Usage{}) {
		field("usage")
		b = appendUsage(b, m.Usage)
	}
	str("stop_reason", string(m.StopReason))
	if m.Synthetic {
		field("synthetic")
		b = append(b, "true"...)
	}
	if len(m.MessageIDs) > 0 {
		field("message_ids")
		b = append(b, '[')
		for i, id := range m.MessageIDs {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, id)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

func appendUsage(b []byte, u llm.Usage) []byte {
	mark := len(b)
	b = append(b, '{')
	num := func(name string, v int) {
		if v == 0 {
			return
		}
		if len(b) > mark+1 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, `":`...)
		b = strconv.AppendInt(b, int64(v), 10)
	}
	num("input", u.InputTokens)
	num("output", u.OutputTokens)
	num("cache_read", u.CacheReadTokens)
	num("cache_write", u.CacheWriteTokens)
	num("reasoning", u.ReasoningTokens)
	return append(b, '}')
}

// appendStringField appends ,"name":"v" unless v is empty (omitempty).
func appendStringField(b []byte, name, v string) []byte {
	if v == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendJSONString(b, v)
}

const hexDigits = "0123456789abcdef"

// appendJSONString quotes s as encoding/json does with HTML escaping off:
// short escapes for \b \f \n \r \t, \u00XX for other control bytes,
// U+FFFD for a byte that is not UTF-8, and U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
