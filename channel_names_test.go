package nanobot_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/channels/kinds"
)

// channelNameHomes are the only product code that may name a chat channel:
// its own folder (internal/channels/<name>/) and the table that lists it.
// The lab (internal/testkit) and the benches are no product code.
func channelNameHomes(name string) []string {
	return []string{"internal/channels/" + name + "/", "internal/channels/kinds/", "internal/testkit/", "bench/"}
}

// TestNoChannelNamesOutsideTheirFolders: "a channel is one folder and one
// row". Outside the channel's folder and the table (internal/channels/kinds),
// no product code may spell a channel's name as a string ("telegram",
// "telegram:…"), nor reach its section as a field of its own
// (cfg.Channels.Telegram), nor import the adapter: everything else iterates
// kinds.All.
func TestNoChannelNamesOutsideTheirFolders(t *testing.T) {
	type rule struct{ name, title string }
	var rules []rule
	for _, k := range kinds.All {
		rules = append(rules, rule{k.Name, strings.ToUpper(k.Name[:1]) + k.Name[1:]})
	}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		slash := filepath.ToSlash(path)
		for _, r := range rules {
			home := false
			for _, h := range channelNameHomes(r.name) {
				if strings.HasPrefix(slash, h) {
					home = true
				}
			}
			if home {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.ImportSpec:
					p, _ := strconv.Unquote(x.Path.Value)
					if strings.HasSuffix(p, "/internal/channels/"+r.name) {
						t.Errorf("%s: imports the %s adapter; build it through kinds.All", fset.Position(x.Pos()), r.name)
					}
					return false
				case *ast.BasicLit:
					if x.Kind != token.STRING {
						return true
					}
					s, err := strconv.Unquote(x.Value)
					if err == nil && (strings.EqualFold(s, r.name) || strings.HasPrefix(strings.ToLower(s), r.name+":")) {
						t.Errorf("%s: names the channel %s (%s); read it from its row in internal/channels/kinds", fset.Position(x.Pos()), r.name, x.Value)
					}
				case *ast.SelectorExpr:
					if x.Sel.Name == r.title {
						if inner, ok := x.X.(*ast.SelectorExpr); ok && inner.Sel.Name == "Channels" {
							t.Errorf("%s: reaches channels.%s as a field; use its row (kinds.All) or %s.Of(cfg) in its folder", fset.Position(x.Pos()), r.name, r.name)
						}
					}
				}
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
