package history

import (
	"strings"
	"testing"
)

func TestTextsCountsAsEstimateText(t *testing.T) {
	c := &Texts{limit: 1 << 10}
	var texts []string
	for i := range 200 {
		texts = append(texts, strings.Repeat("word ", i%40)+strings.Repeat("日本", i%7)+"{\"k\": 12345}")
	}
	for round := range 3 {
		for _, s := range texts {
			if got, want := c.text(s, true), EstimateText(s); got != want {
				t.Fatalf("round %d: Text(%q) = %d, want %d", round, s, got, want)
			}
		}
	}
	if (*Texts)(nil).text(texts[50], true) != EstimateText(texts[50]) {
		t.Fatal("a nil *Texts does not estimate like EstimateText")
	}
}

// The cache keeps at most two generations of limit bytes of text alive, and
// what is read on every turn stays in it.
func TestTextsStaysBounded(t *testing.T) {
	c := &Texts{limit: 4 << 10}
	hot := strings.Repeat("the text every turn reads ", 10)
	for i := range 1000 {
		c.text(hot, true)
		c.text(strings.Repeat("x", 100)+strings.Repeat("y", i%50)+string(rune('a'+i%26))+strings.Repeat("z", i), true)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	size := 0
	for _, m := range []map[textKey]int32{c.cur, c.old} {
		for k := range m {
			size += k.n
		}
	}
	if size > 2*c.limit+len(hot) {
		t.Errorf("cache holds %d bytes of text, want at most %d", size, 2*c.limit)
	}
	if _, ok := c.cur[textKey{unsafeData(hot), len(hot)}]; !ok {
		t.Errorf("the text read on every call is not in the current generation")
	}
}

func BenchmarkTexts(b *testing.B) {
	s := strings.Repeat("Noted, I will keep that in mind. Anything else you want me to look at today? ", 4)
	b.Run("EstimateText", func(b *testing.B) {
		for b.Loop() {
			EstimateText(s)
		}
	})
	b.Run("cached", func(b *testing.B) {
		c := &Texts{}
		for b.Loop() {
			c.text(s, true)
		}
	})
}

// Texts.Project adds only the stored messages' texts: the current turn's
// messages are stored later as copies, so their texts would only be kept
// alive, never looked up again.
func TestTextsKeepOnlyStoredTexts(t *testing.T) {
	session := genSession(7, "c", 60)
	stored, turn := session[:len(session)-4], session[len(session)-4:]
	c := &Texts{}
	c.Project(testSystem, stored, turn, Options{Budget: 50000})
	keep := map[textKey]bool{}
	for _, m := range stored {
		for _, p := range m.Parts {
			for _, s := range []string{p.Text, p.Summary, p.Gist} {
				if s != "" {
					keep[textKey{unsafeData(s), len(s)}] = true
				}
			}
			if p.Result != nil {
				for _, s := range []string{p.Result.Content.Live, p.Result.Content.Summary, p.Result.Content.Gist} {
					if s != "" {
						keep[textKey{unsafeData(s), len(s)}] = true
					}
				}
			}
		}
	}
	if len(c.cur) == 0 {
		t.Fatal("Texts.Project added nothing")
	}
	for k := range c.cur {
		if !keep[k] {
			t.Errorf("a text of %d bytes that no stored message holds is in the cache", k.n)
		}
	}
}
