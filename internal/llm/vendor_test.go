package llm_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestNamesNoVendor keeps llm the neutral vocabulary (docs/architecture.md,
// "Model failures"): no identifier, string or comment of its product code
// names a vendor, a vendor's model family or one of the adapters. What a
// vendor's error codes, stop words or phrases mean is its adapter's to say
// (internal/provider/<adapter>, its vocabulary), so a new provider never
// needs a line here.
func TestNamesNoVendor(t *testing.T) {
	words := []string{"openai", "anthropic", "gemini", "google", "claude", "gpt", "ollama", "openrouter",
		"vllm", "deepseek", "mistral", "groq", "azure", "bedrock", "llama", "qwen", "cohere", "xai", "grok"}
	// Every adapter folder's name is a vendor word too, so a new one is
	// covered without editing this list.
	dirs, err := os.ReadDir("../provider")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if d.IsDir() && !slices.Contains([]string{"httpcall", "render", "sse"}, d.Name()) {
			words = append(words, d.Name())
		}
	}
	vendor := regexp.MustCompile(`(?i)\b(` + strings.Join(words, "|") + `)`)

	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		report := func(pos token.Pos, what, text string) {
			if m := vendor.FindString(text); m != "" {
				t.Errorf("%s: %s names %q: %s", fset.Position(pos), what, m, text)
			}
		}
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				report(c.Pos(), "a comment", c.Text)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Ident:
				report(n.Pos(), "an identifier", n.Name)
			case *ast.BasicLit:
				if n.Kind == token.STRING {
					report(n.Pos(), "a string", n.Value)
				}
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no product file of llm was read")
	}
}
