package web

import (
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// moduleImport matches a static import (`import … from './x.js'`, `import
// './x.js'`) and a dynamic one (`import('./x.js')`) of a sibling module.
var moduleImport = regexp.MustCompile(`(?m)(?:^\s*import\s[^;]*?from\s*|^\s*import\s*|\bimport\(\s*)['"]\./([\w.-]+\.js)['"]`)

// staticImports reads the page's modules and what each imports.
func staticImports(t *testing.T) map[string][]string {
	t.Helper()
	names, err := fs.Glob(staticFS, "static/*.js")
	if err != nil || len(names) == 0 {
		t.Fatalf("no embedded modules: %v", err)
	}
	graph := map[string][]string{}
	for _, name := range names {
		src, err := fs.ReadFile(staticFS, name)
		if err != nil {
			t.Fatal(err)
		}
		base := strings.TrimPrefix(name, "static/")
		graph[base] = nil
		for _, m := range moduleImport.FindAllStringSubmatch(string(src), -1) {
			graph[base] = append(graph[base], m[1])
		}
	}
	return graph
}

// TestPageModulesImportOneWay: the page's scripts import each other without a
// circle (a module in a circle runs against another's half-made bindings, and
// the order they load in stops being readable from the code). Dynamic imports
// count: app.js loading panel.js on demand while panel.js imported app.js was
// the circle this guards against.
func TestPageModulesImportOneWay(t *testing.T) {
	graph := staticImports(t)
	if len(graph["app.js"]) == 0 || len(graph["panel.js"]) == 0 {
		t.Fatalf("imports %v: the test's parser no longer sees them", graph)
	}
	const (
		unseen = iota
		open
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(string)
	visit = func(m string) {
		switch state[m] {
		case open:
			t.Errorf("import circle: %s → %s", strings.Join(path, " → "), m)
			return
		case done:
			return
		}
		if _, ok := graph[m]; !ok {
			t.Errorf("%s imports %s, which is not embedded", path[len(path)-1], m)
			return
		}
		state[m] = open
		path = append(path, m)
		for _, dep := range graph[m] {
			visit(dep)
		}
		path = path[:len(path)-1]
		state[m] = done
	}
	names := make([]string, 0, len(graph))
	for m := range graph {
		names = append(names, m)
	}
	slices.Sort(names)
	for _, m := range names {
		visit(m)
	}
}
