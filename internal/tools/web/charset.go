package web

import (
	"bytes"
	"mime"
	"regexp"
	"strings"
	"sync"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/unicode"
)

// The decoders nanobot carries: UTF-16 and the single-byte charsets
// (ISO-8859-x, Windows-125x, KOI8). The multi-byte legacy CJK charsets are
// left out on purpose: their tables are large in the binary
// (docs/BENCHMARKS.md#figures-behind-code-choices) and almost every page today is UTF-8; such a page is passed on with its invalid bytes
// replaced, and the fetch result says so.
var decoders = map[string]encoding.Encoding{
	"utf-16":       unicode.UTF16(unicode.BigEndian, unicode.UseBOM),
	"utf-16be":     unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM),
	"utf-16le":     unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM),
	"iso-8859-1":   charmap.Windows1252, // as browsers do (WHATWG Encoding)
	"latin1":       charmap.Windows1252,
	"us-ascii":     charmap.Windows1252,
	"ascii":        charmap.Windows1252,
	"iso-8859-2":   charmap.ISO8859_2,
	"iso-8859-3":   charmap.ISO8859_3,
	"iso-8859-4":   charmap.ISO8859_4,
	"iso-8859-5":   charmap.ISO8859_5,
	"iso-8859-6":   charmap.ISO8859_6,
	"iso-8859-7":   charmap.ISO8859_7,
	"iso-8859-8":   charmap.ISO8859_8,
	"iso-8859-9":   charmap.Windows1254,
	"iso-8859-10":  charmap.ISO8859_10,
	"iso-8859-13":  charmap.ISO8859_13,
	"iso-8859-14":  charmap.ISO8859_14,
	"iso-8859-15":  charmap.ISO8859_15,
	"iso-8859-16":  charmap.ISO8859_16,
	"windows-874":  charmap.Windows874,
	"windows-1250": charmap.Windows1250,
	"windows-1251": charmap.Windows1251,
	"windows-1252": charmap.Windows1252,
	"windows-1253": charmap.Windows1253,
	"windows-1254": charmap.Windows1254,
	"windows-1255": charmap.Windows1255,
	"windows-1256": charmap.Windows1256,
	"windows-1257": charmap.Windows1257,
	"windows-1258": charmap.Windows1258,
	"koi8-r":       charmap.KOI8R,
	"koi8-u":       charmap.KOI8U,
	"cp1251":       charmap.Windows1251,
	"cp1252":       charmap.Windows1252,
}

// metaCharset finds <meta charset="x"> or <meta http-equiv=... content="...;
// charset=x"> in the head of a page, as the HTML prescan does.
var metaCharset = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)<meta[^>]+charset\s*=\s*["']?\s*([a-z0-9_:.\-]+)`)
})

// charsetOf returns the lower-case charset label of a response: the
// Content-Type's, else a byte-order mark's, else the page's meta tag's, else
// "utf-8".
func charsetOf(body []byte, contentType string) string {
	if _, params, err := mime.ParseMediaType(contentType); err == nil && params["charset"] != "" {
		return strings.ToLower(strings.TrimSpace(params["charset"]))
	}
	switch {
	case bytes.HasPrefix(body, []byte{0xEF, 0xBB, 0xBF}):
		return "utf-8"
	case bytes.HasPrefix(body, []byte{0xFE, 0xFF}), bytes.HasPrefix(body, []byte{0xFF, 0xFE}):
		return "utf-16"
	}
	head := body[:min(len(body), 1024)]
	if m := metaCharset().FindSubmatch(head); m != nil {
		return strings.ToLower(string(m[1]))
	}
	return "utf-8"
}

// toUTF8 decodes body by its declared or sniffed charset. Unknown charsets
// and invalid bytes come out with U+FFFD in place of what could not be read.
func toUTF8(body []byte, contentType string) []byte {
	name := charsetOf(body, contentType)
	if enc, ok := decoders[name]; ok {
		if out, err := enc.NewDecoder().Bytes(body); err == nil {
			return bytes.ToValidUTF8(out, []byte("\uFFFD"))
		}
	}
	return bytes.ToValidUTF8(body, []byte("\uFFFD"))
}
