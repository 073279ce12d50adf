package web

import (
	"testing"
)

func TestToUTF8(t *testing.T) {
	tests := []struct {
		name, contentType string
		body              []byte
		want              string
	}{
		{"utf-8 declared", "text/html; charset=utf-8", []byte("café"), "café"},
		{"no declaration means utf-8", "text/html", []byte("café"), "café"},
		{"latin1 header", "text/html; charset=ISO-8859-1", []byte("caf\xe9"), "café"},
		{"windows-1252 smart quotes", "text/plain; charset=windows-1252", []byte("\x93hi\x94"), "“hi”"},
		{"cyrillic", "text/plain; charset=windows-1251", []byte("\xcf\xf0\xe8\xe2\xe5\xf2"), "Привет"},
		{"meta charset", "text/html", []byte(`<html><head><meta charset="iso-8859-15"></head>` + "\xa4"), `<html><head><meta charset="iso-8859-15"></head>€`},
		{"meta http-equiv", "text/html", []byte(`<meta http-equiv="Content-Type" content="text/html; charset=koi8-r">` + "\xf0"), `<meta http-equiv="Content-Type" content="text/html; charset=koi8-r">П`},
		{"utf-16 with BOM", "", []byte{0xFF, 0xFE, 'h', 0, 'i', 0}, "hi"},
		{"utf-8 BOM wins over meta", "", []byte("\xEF\xBB\xBF<meta charset=latin1>é"), "\uFEFF<meta charset=latin1>é"},
		{"unsupported CJK charset keeps readable bytes", "text/html; charset=shift_jis", []byte("abc\x82\xa0"), "abc\uFFFD"},
		{"invalid utf-8 replaced", "text/plain", []byte("ok\xff"), "ok\uFFFD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(toUTF8(tt.body, tt.contentType)); got != tt.want {
				t.Errorf("toUTF8 = %q, want %q", got, tt.want)
			}
		})
	}
}
