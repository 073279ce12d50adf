package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/nanobot-go/nanobot/internal/testkit/gobuild"
)

// nanobot and floor are the gateway and floor binaries, built once for
// these tests.
var nanobot, floor string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nanobot-bench-test")
	if err != nil {
		panic(err)
	}
	nanobot, floor = filepath.Join(dir, "nanobot"), filepath.Join(dir, "nanobot-floor")
	// nanobot is built in the product module, with its go.mod, as run does;
	// the floor here, in the bench module. Both are built as this test
	// binary was (gobuild), not as a release: the figures here are checked
	// for shape only, and the build cache already holds the tree this way.
	product, err := productDir(context.Background())
	if err != nil {
		panic(err)
	}
	for _, kv := range gobuild.Env() {
		k, v, _ := strings.Cut(kv, "=")
		if err := os.Setenv(k, v); err != nil {
			panic(err)
		}
	}
	if err := gobuild.Build(product, nanobot, "./cmd/nanobot"); err != nil {
		panic("build nanobot: " + err.Error())
	}
	if err := gobuild.Build("", floor, "../nanobot-floor"); err != nil {
		panic("build the floor: " + err.Error())
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			_, _ = os.Stderr.WriteString("goroutines leaked: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// TestEveryScenarioAgainstTheRealGateway runs each scenario once, briefly,
// against the real binary and checks the figures are measurements: turns
// happened, latencies are positive, memory was read. CPU times are checked
// for shape only (not negative, not absurd): /proc counts them in 10 ms
// ticks, and a few fast turns may fall within one, so a positive CPU time
// is not certain here; TestReadCPUCountsTheWorkDone shows the meter counts
// CPU where the work is certain to be counted.
func TestEveryScenarioAgainstTheRealGateway(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	jsonPath := filepath.Join(t.TempDir(), "bench.json")
	var stdout, stderr bytes.Buffer
	args := []string{"-nanobot", nanobot, "-runs", "1", "-chats", "3", "-warmup", "300ms", "-window", "1500ms",
		"-prior", "10,300", "-history-chats", "2", "-history-turns", "2", "-settle", "100ms", "-working-set", "300ms", "-stream-turns", "2",
		"-api-clients", "2", "-web-turns", "2", "-web-clients", "3", "-web-client-turns", "2", "-workers", "2", "-scale-chats", "4", "-model-delay", "50ms", "-json", jsonPath}
	if err := run(ctx, args, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	for _, want := range []string{"### Startup and idle memory", "### Load", "### Per-turn cost", "### Streaming", "### API", "### Web page", "### Scale-out", "| 3 | 1 |", "| 300 | 1 |"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, stdout.String())
		}
	}
	rep := readReport(t, jsonPath)
	if len(rep.Idle) != 1 || len(rep.Load) != 1 || len(rep.History) != 2 || len(rep.Stream) != 1 || len(rep.API) != 1 {
		t.Fatalf("runs recorded: idle %d load %d history %d stream %d api %d", len(rep.Idle), len(rep.Load), len(rep.History), len(rep.Stream), len(rep.API))
	}
	if a := rep.API[0]; a.Chats != 2 || a.Turns == 0 || a.Added.P50 <= 0 || a.Model.P50 <= 0 || a.CPU < 0 || a.ModelCalls != 1 || a.Added.P50 > a.EndToEnd.P50 {
		t.Errorf("api = %+v", a)
	}
	idle := rep.Idle[0]
	if idle.Ready.Healthz <= 0 || idle.Ready.FirstPoll <= 0 || idle.First.Healthz <= 0 || idle.Memory.RSS <= 0 || idle.Memory.Anon <= 0 {
		t.Errorf("idle = %+v", idle)
	}
	if idle.WorkingSet.RSS <= 0 && idle.WorkingSetErr == "" {
		t.Errorf("idle working set neither measured nor explained: %+v", idle)
	}
	load := rep.Load[0]
	if load.Chats != 3 || load.Turns == 0 || load.Added.P50 <= 0 || load.Model.P50 <= 0 || load.CPU < 0 || load.RSS.RSS <= 0 || load.ModelCalls != 1 {
		t.Errorf("load = %+v", load)
	}
	if load.Added.P50 > load.EndToEnd.P50 {
		t.Errorf("added latency %v above end-to-end %v", load.Added.P50, load.EndToEnd.P50)
	}
	for _, h := range rep.History {
		if h.Turns != 4 || h.First.N != 2 || h.Added.P50 <= 0 || h.ReqBytes == 0 {
			t.Errorf("history = %+v", h)
		}
	}
	if small, big := rep.History[0], rep.History[1]; big.ReqBytes <= small.ReqBytes {
		t.Errorf("request with 300 prior messages (%d bytes) not larger than with 10 (%d)", big.ReqBytes, small.ReqBytes)
	}
	// That the first message comes at the first token, not at the end, is
	// the scenario's own check (it holds the stream until the first message
	// shows); no latency bound is asserted here: a loaded machine may take
	// any time.
	if s := rep.Stream[0]; s.N != 2 || s.P50 <= 0 {
		t.Errorf("stream = %+v", s)
	}
	if len(rep.Web) != 1 {
		t.Fatalf("web runs recorded: %d", len(rep.Web))
	}
	if w := rep.Web[0]; w.FirstVisible.N != 2 || w.FirstVisible.P50 <= 0 ||
		w.PageGzip <= 0 || w.PageGzip > 150_000 || w.PanelGzip <= 0 || w.Clients != 3 || w.Turns != 2 {
		t.Errorf("web = %+v", w)
	}
	// The concurrency phases: every client finished every turn, and the
	// turns cost the gateway no negative CPU and not a second each. (Six
	// fast turns may fall within one 10 ms tick of /proc: 0 is possible.)
	if w := rep.Web[0]; w.ClientTurns != 2 || w.ManyTurns != 3*2 || w.CPUOne < 0 || w.CPUMany < 0 || w.CPUOne > time.Second || w.CPUMany > time.Second {
		t.Errorf("web concurrency = %+v", w)
	}
	if !strings.Contains(stdout.String(), "3 clients chatting at once") {
		t.Errorf("report lacks the concurrency rows:\n%s", stdout.String())
	}
	if len(rep.Scale) != 2 {
		t.Fatalf("scale runs recorded: %d, want the single process and 2 workers", len(rep.Scale))
	}
	for _, r := range rep.Scale {
		if r.Turns == 0 || r.EndToEnd.P50 < 50*time.Millisecond {
			t.Errorf("scale with %d workers = %+v: no turns, or faster than the model", r.Workers, r.loadResult)
		}
	}
	if rep.BinaryBytes == 0 || rep.Machine.CPUs == 0 {
		t.Errorf("report header: binary %d bytes, %d CPUs", rep.BinaryBytes, rep.Machine.CPUs)
	}
}

// readReport reads the -json output of a run.
func readReport(t *testing.T, path string) report {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("-json output: %v", err)
	}
	return rep
}

func TestFlagsAreChecked(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-scenario", "nope"}, `unknown "nope"`},
		{[]string{"-chats", "1,x"}, "-chats"},
		{[]string{"-prior", "0"}, "-prior"},
		{[]string{"-api-clients", "0"}, "-api-clients"},
		{[]string{"-runs", "0"}, "at least 1"},
		{[]string{"-floor"}, "does not go with -nanobot"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), append([]string{"-nanobot", nanobot}, tt.args...), &out, &out)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

// The floor is measured by the load scenario like nanobot, and it serves
// only what the floor's scenarios need.
func TestFloorUnderLoad(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	jsonPath := filepath.Join(t.TempDir(), "bench.json")
	var stdout, stderr bytes.Buffer
	args := []string{"-nanobot", floor, "-scenario", "load", "-runs", "1", "-chats", "3", "-warmup", "300ms", "-window", "1500ms", "-json", jsonPath}
	if err := run(ctx, args, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	rep := readReport(t, jsonPath)
	if len(rep.Load) != 1 {
		t.Fatalf("load runs recorded: %d", len(rep.Load))
	}
	// A request as long as nanobot's: the system prompt and ten tools are
	// ~20 KiB before any history. (CPU in 10 ms ticks: 0 is possible.)
	if l := rep.Load[0]; l.Turns == 0 || l.CPU < 0 || l.ModelCalls != 1 || l.ReqBytes < 20<<10 {
		t.Errorf("floor load = %+v", l)
	}

	var out bytes.Buffer
	err := run(ctx, []string{"-floor", "-scenario", "history"}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "needs nanobot") {
		t.Errorf("-floor -scenario history: err = %v, want it refused", err)
	}
}

func TestParseChat(t *testing.T) {
	tests := []struct {
		text string
		want int64
	}{
		{"[Mon 2026-01-05 10:00 UTC · telegram · chat -1001000000007]\nbench:-1001000000007:3 How are things", -1001000000007},
		{"no tag here", 0},
		{"bench:notanumber:1", 0},
	}
	for _, tt := range tests {
		if got := parseChat(tt.text); got != tt.want {
			t.Errorf("parseChat(%q) = %d, want %d", tt.text, got, tt.want)
		}
	}
}
