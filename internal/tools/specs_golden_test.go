package tools_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/nanobot-go/nanobot/internal/config"
	"github.com/nanobot-go/nanobot/internal/schedule"
	"github.com/nanobot-go/nanobot/internal/testkit/golden"
	"github.com/nanobot-go/nanobot/internal/tools"
	"github.com/nanobot-go/nanobot/internal/tools/web"
	"github.com/nanobot-go/nanobot/internal/workspace"
)

// TestSpecsGolden pins the name, description and parameter schema of every
// tool built from this package and its neighbours (web, cron) to the byte:
// they go into every prompt, so a change defeats the provider's prompt cache
// and changes what the model is told.
func TestSpecsGolden(t *testing.T) {
	dir := t.TempDir()
	ws, err := workspace.OpenRoot(dir, workspace.Options{Restrict: true, Home: filepath.Dir(dir)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	log := zaptest.NewLogger(t)
	exec, err := tools.NewExec(config.Defaults().Tools.Exec, ws, tools.ExecOptions{}, log)
	if err != nil {
		t.Fatal(err)
	}
	d := config.Defaults().Tools.Web
	all := []tools.Tool{
		tools.NewReadFile(ws),
		tools.NewWriteFile(ws),
		tools.NewEditFile(ws),
		tools.NewListDir(ws),
		exec,
		tools.NewMessage(nil, nil, ws),
		web.NewFetch(web.FetchConfig{MaxBytes: d.FetchMaxBytes}, log),
		web.NewSearch(web.SearchConfig{MaxResults: d.MaxResults}, log),
		schedule.NewCron(schedule.CronConfig{Path: filepath.Join(dir, "cron", "jobs.json")}, schedule.CronDeps{}, log).Tool(nil),
	}
	var b bytes.Buffer
	for _, tool := range all {
		s := tool.Spec()
		fmt.Fprintf(&b, "== %s\n%s\n-- parameters\n%s\n\n", s.Name, s.Description, s.Parameters)
	}
	golden.Check(t, filepath.Join("testdata", "specs.golden"), b.Bytes())
}
