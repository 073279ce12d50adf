// Command lint is the project's linter: a go vet tool that bundles exactly
// the analyzers listed in analyzers below, pinned by this folder's go.mod so
// that the product's go.mod does not grow (docs/lint.md says why this rather
// than golangci-lint, and how to run it).
//
//	go build -o /tmp/nanobot-lint ./tools/lint   (from tools/lint)
//	go vet -vettool=/tmp/nanobot-lint ./...      (from the module to check)
package main

import (
	"go/token"
	"slices"
	"strings"

	"codeberg.org/polyfloyd/go-errorlint/errorlint"
	"github.com/kisielk/errcheck/errcheck"
	"github.com/timakin/bodyclose/passes/bodyclose"
	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/multichecker"
	"honnef.co/go/tools/staticcheck"
)

func main() {
	errcheck.DefaultExcludedSymbols = append(errcheck.DefaultExcludedSymbols, unchecked...)
	list := analyzers()
	for _, a := range list {
		honourIgnore(a)
	}
	multichecker.Main(list...)
}

// unchecked adds to errcheck's own exclusions (fmt.Print*, writes to an
// in-memory buffer, hash writes: errcheck.DefaultExcludedSymbols) the calls
// whose error nobody can act on. Everything else is checked, or discarded
// with _ = where it is read, which says the drop is deliberate.
var unchecked = []string{
	// Closing a body or a reader once read: the read reported what went
	// wrong. A writer's Close (a file, a pipe, a multipart writer) is still
	// checked, since that is where a lost write shows.
	"(io.ReadCloser).Close",
	// Closing a directory handle: nothing is buffered behind it.
	"(*os.Root).Close",
	"(*github.com/nanobot-go/nanobot/internal/workspace.Root).Close",
	"(*github.com/nanobot-go/nanobot/internal/workspace.Files).Close",
	// A command's text for the person at the terminal (cobra's
	// OutOrStdout, a tabwriter over it): a failed write has nobody to
	// report to, and a closed pipe ends the process with SIGPIPE anyway.
	// What a program reads (a file, a socket, an HTTP answer) is typed as
	// such and still checked.
	"fmt.Fprint(io.Writer)",
	"fmt.Fprintf(io.Writer)",
	"fmt.Fprintln(io.Writer)",
	"fmt.Fprint(*text/tabwriter.Writer)",
	"fmt.Fprintf(*text/tabwriter.Writer)",
	"fmt.Fprintln(*text/tabwriter.Writer)",
}

// analyzers is the whole list; a linter not named here does not run.
func analyzers() []*analysis.Analyzer {
	list := []*analysis.Analyzer{
		// Errors that are dropped: a failed Close, Write or Encode nobody reads.
		errcheck.Analyzer,
		// Errors compared with == or asserted with a type switch, which miss a
		// wrapped error: errors.Is and errors.As instead.
		errorlint.NewAnalyzer(),
		// HTTP response bodies that are never closed, leaking the connection.
		bodyclose.Analyzer,
	}
	// staticcheck's bug checks (SA*), as its own command runs them by default:
	// every SA check except those it marks non-default (SA9003, empty branch).
	for _, a := range staticcheck.Analyzers {
		if a.Doc.NonDefault {
			continue
		}
		list = append(list, a.Analyzer)
	}
	return list
}

// honourIgnore drops a's findings on the line just below (or on the line of)
// a comment in staticcheck's syntax naming a's check and saying why:
//
//	//lint:ignore SA1019 vLLM and Ollama read max_tokens, not its successor
//
// It is for a false positive only; a directive without a reason counts for
// nothing.
func honourIgnore(a *analysis.Analyzer) {
	run := a.Run
	a.Run = func(pass *analysis.Pass) (any, error) {
		ignored := map[token.Position]bool{} // file and line, column 0
		for _, f := range pass.Files {
			for _, g := range f.Comments {
				for _, c := range g.List {
					fields := strings.Fields(strings.TrimPrefix(c.Text, "//lint:ignore "))
					if !strings.HasPrefix(c.Text, "//lint:ignore ") || len(fields) < 2 ||
						!slices.Contains(strings.Split(fields[0], ","), a.Name) {
						continue
					}
					at := pass.Fset.Position(c.Pos())
					ignored[token.Position{Filename: at.Filename, Line: at.Line}] = true
					ignored[token.Position{Filename: at.Filename, Line: at.Line + 1}] = true
				}
			}
		}
		report := pass.Report
		pass.Report = func(d analysis.Diagnostic) {
			at := pass.Fset.Position(d.Pos)
			if !ignored[token.Position{Filename: at.Filename, Line: at.Line}] {
				report(d)
			}
		}
		return run(pass)
	}
}
