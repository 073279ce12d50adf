package web

import (
	"net/url"
	"strings"
	"testing"
)

func TestMainContent(t *testing.T) {
	long := strings.Repeat("Real content about the topic. ", 12)
	tests := []struct {
		name        string
		page        string
		keep, drop  []string
		wantArticle bool
	}{
		{
			name:        "biggest article wins",
			page:        `<body><nav>Home Shop</nav><article><p>teaser</p></article><article><h1>Story</h1><p>` + long + `</p></article><footer>Imprint</footer></body>`,
			keep:        []string{"Story", "Real content"},
			drop:        []string{"Home Shop", "teaser", "Imprint"},
			wantArticle: true,
		},
		{
			name:        "main element",
			page:        `<body><header>Site title</header><main><p>` + long + `</p><div class="share-buttons">Tweet this</div></main><aside>Ads here</aside></body>`,
			keep:        []string{"Real content"},
			drop:        []string{"Site title", "Tweet this", "Ads here"},
			wantArticle: true,
		},
		{
			name:        "role main",
			page:        `<body><div id="menu">Menu items</div><div role="main"><p>` + long + `</p></div></body>`,
			keep:        []string{"Real content"},
			drop:        []string{"Menu items"},
			wantArticle: true,
		},
		{
			name:        "body without landmarks loses its chrome",
			page:        `<body><div class="cookie-banner">We use cookies</div><div class="content"><p>` + long + `</p></div><div id="footer">Contact</div><script>track()</script></body>`,
			keep:        []string{"Real content"},
			drop:        []string{"We use cookies", "Contact", "track()"},
			wantArticle: true,
		},
		{
			name: "too little text: the whole page",
			page: `<body><nav>Home</nav><p>Short page.</p></body>`,
			keep: []string{"Home", "Short page."},
		},
	}
	m := newMarkdowner()
	u, _ := url.Parse("https://example.org/page")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := m.convert([]byte(tt.page), u, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range tt.keep {
				if !strings.Contains(p.Markdown, k) {
					t.Errorf("lost %q:\n%s", k, p.Markdown)
				}
			}
			for _, d := range tt.drop {
				if strings.Contains(p.Markdown, d) {
					t.Errorf("kept %q:\n%s", d, p.Markdown)
				}
			}
			if p.Article != tt.wantArticle {
				t.Errorf("Article = %v, want %v", p.Article, tt.wantArticle)
			}
		})
	}
}
