package telegramfake

import (
	"fmt"
	"strconv"
	"strings"
)

// allowedTags are the tags Telegram's parse_mode HTML accepts.
var allowedTags = map[string]bool{
	"b": true, "strong": true, "i": true, "em": true, "u": true, "ins": true,
	"s": true, "strike": true, "del": true, "span": true, "tg-spoiler": true,
	"a": true, "code": true, "pre": true, "blockquote": true, "tg-emoji": true,
}

// ParseHTML checks s the way Telegram checks parse_mode HTML and returns the
// text a user would see (tags removed, entities decoded). Its errors read
// like Telegram's, after "Bad Request: can't parse entities: ". It is
// deliberately a little stricter than Telegram: no tag may open inside
// code or pre (except code directly in pre), links may not nest, blockquotes
// may not nest, and every & must start a known entity.
func ParseHTML(s string) (string, error) {
	var out strings.Builder
	var stack []string
	inside := func(name string) bool {
		for _, t := range stack {
			if t == name {
				return true
			}
		}
		return false
	}
	for i := 0; i < len(s); {
		switch c := s[i]; c {
		case '<':
			end := strings.IndexByte(s[i:], '>')
			if end < 0 {
				return "", fmt.Errorf("Unclosed start tag at byte offset %d", i)
			}
			raw := s[i+1 : i+end]
			if strings.HasPrefix(raw, "/") {
				name := strings.ToLower(strings.TrimSpace(raw[1:]))
				if len(stack) == 0 {
					return "", fmt.Errorf("Unexpected end tag at byte offset %d", i)
				}
				if top := stack[len(stack)-1]; top != name {
					return "", fmt.Errorf("Unmatched end tag at byte offset %d, expected \"</%s>\", found \"</%s>\"", i, top, name)
				}
				stack = stack[:len(stack)-1]
				i += end + 1
				continue
			}
			name, attrs, err := parseTag(raw)
			if err != nil {
				return "", fmt.Errorf("%v at byte offset %d", err, i)
			}
			if !allowedTags[name] {
				return "", fmt.Errorf("Unsupported start tag \"%s\" at byte offset %d", name, i)
			}
			if len(stack) > 0 {
				top := stack[len(stack)-1]
				if (top == "code" || top == "pre") && !(top == "pre" && name == "code") {
					return "", fmt.Errorf("Can't use tag \"%s\" inside \"%s\" at byte offset %d", name, top, i)
				}
			}
			if (name == "a" && inside("a")) || (name == "blockquote" && inside("blockquote")) {
				return "", fmt.Errorf("Nested \"%s\" tags are not allowed at byte offset %d", name, i)
			}
			switch name {
			case "a":
				if attrs["href"] == "" {
					return "", fmt.Errorf("Tag \"a\" must have attribute \"href\" at byte offset %d", i)
				}
			case "span":
				if attrs["class"] != "tg-spoiler" {
					return "", fmt.Errorf("Tag \"span\" must have class \"tg-spoiler\" at byte offset %d", i)
				}
			case "code":
				if cl, ok := attrs["class"]; ok && !strings.HasPrefix(cl, "language-") {
					return "", fmt.Errorf("Unsupported class \"%s\" of tag \"code\" at byte offset %d", cl, i)
				}
			}
			stack = append(stack, name)
			i += end + 1
		case '&':
			r, n, err := parseEntity(s[i:])
			if err != nil {
				return "", fmt.Errorf("%v at byte offset %d", err, i)
			}
			out.WriteString(r)
			i += n
		default:
			out.WriteByte(c)
			i++
		}
	}
	if len(stack) > 0 {
		return "", fmt.Errorf("Can't find end tag corresponding to start tag \"%s\"", stack[len(stack)-1])
	}
	return out.String(), nil
}

// parseTag splits `name attr="v" attr2='w'` into its name and attributes.
func parseTag(raw string) (string, map[string]string, error) {
	if raw == "" || raw[0] == ' ' || raw[0] == '\t' || raw[0] == '\n' {
		return "", nil, fmt.Errorf("Unsupported start tag \"\"")
	}
	raw = strings.TrimSuffix(strings.TrimSpace(raw), "/")
	n := strings.IndexAny(raw, " \t\n")
	name := raw
	rest := ""
	if n >= 0 {
		name, rest = raw[:n], raw[n:]
	}
	name = strings.ToLower(name)
	if name == "" {
		return "", nil, fmt.Errorf("Empty tag name")
	}
	attrs := map[string]string{}
	for rest = strings.TrimSpace(rest); rest != ""; rest = strings.TrimSpace(rest) {
		eq := strings.IndexByte(rest, '=')
		sp := strings.IndexAny(rest, " \t\n")
		if eq < 0 || (sp >= 0 && sp < eq) {
			// A bare attribute (e.g. "expandable").
			key := rest
			if sp >= 0 {
				key, rest = rest[:sp], rest[sp:]
			} else {
				rest = ""
			}
			attrs[strings.ToLower(key)] = ""
			continue
		}
		key := strings.ToLower(strings.TrimSpace(rest[:eq]))
		rest = strings.TrimSpace(rest[eq+1:])
		var val string
		if rest != "" && (rest[0] == '"' || rest[0] == '\'') {
			q := rest[0]
			end := strings.IndexByte(rest[1:], q)
			if end < 0 {
				return "", nil, fmt.Errorf("Unclosed attribute value")
			}
			val, rest = rest[1:1+end], rest[2+end:]
		} else {
			end := strings.IndexAny(rest, " \t\n")
			if end < 0 {
				end = len(rest)
			}
			val, rest = rest[:end], rest[end:]
		}
		decoded, err := decodeEntities(val)
		if err != nil {
			return "", nil, err
		}
		attrs[key] = decoded
	}
	return name, attrs, nil
}

func decodeEntities(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '&' {
			b.WriteByte(s[i])
			i++
			continue
		}
		r, n, err := parseEntity(s[i:])
		if err != nil {
			return "", err
		}
		b.WriteString(r)
		i += n
	}
	return b.String(), nil
}

// parseEntity decodes the entity at the start of s.
func parseEntity(s string) (string, int, error) {
	end := strings.IndexByte(s, ';')
	if end < 0 || end > 12 {
		return "", 0, fmt.Errorf("Character '&' must be escaped as \"&amp;\"")
	}
	name := s[1:end]
	switch name {
	case "lt":
		return "<", end + 1, nil
	case "gt":
		return ">", end + 1, nil
	case "amp":
		return "&", end + 1, nil
	case "quot":
		return "\"", end + 1, nil
	}
	if strings.HasPrefix(name, "#") {
		num := name[1:]
		base := 10
		if strings.HasPrefix(num, "x") || strings.HasPrefix(num, "X") {
			num, base = num[1:], 16
		}
		v, err := strconv.ParseUint(num, base, 32)
		if err == nil && v > 0 && v <= 0x10FFFF {
			return string(rune(v)), end + 1, nil
		}
	}
	return "", 0, fmt.Errorf("Unsupported HTML entity \"&%s;\"", name)
}
