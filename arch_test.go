package nanobot_test

import (
	"bufio"
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/nanobot-go/nanobot/"

// allowed lists, for each package (by prefix of its path inside the module),
// which packages of this module it may import. It encodes the layering
// (docs/architecture.md#the-rooms): the vocabulary packages are leaves,
// channels and the agent meet only on the bus, and only the daemon wires
// everything together.
var allowed = []struct {
	pkg     string
	imports []string
}{
	{"internal/llm", nil},
	// commands (the chat command table) and bytesize (how sizes are written)
	// are leaves read on both sides of the bus.
	{"internal/commands", nil},
	{"internal/bytesize", nil},
	{"internal/config", nil},
	{"internal/logging", nil},
	{"internal/filelock", nil},
	// atomicfile replaces the files kept outside the workspace, whole.
	{"internal/atomicfile", nil},
	{"internal/sandbox", nil},
	{"internal/workspace", []string{"internal/filelock", "internal/bytesize"}},
	{"internal/skills", nil},
	{"internal/inbox", []string{"internal/workspace"}},
	{"internal/channels/clock", nil},
	{"internal/bus", []string{"internal/llm"}},
	{"internal/bus/natsbus", []string{"internal/llm", "internal/bus", "internal/config", "internal/logging", "internal/commands"}},
	{"internal/history", []string{"internal/llm", "internal/bytesize"}},
	{"internal/session", []string{"internal/llm", "internal/filelock", "internal/atomicfile"}},
	// usage, the ledger and budgets, sits under the router that records
	// every call; it reads the projection's token estimate.
	{"internal/usage/usagejs", []string{"internal/llm", "internal/usage", "internal/bus/natsbus", "internal/config", "internal/atomicfile"}},
	{"internal/usage", []string{"internal/llm", "internal/history", "internal/atomicfile", "internal/config", "internal/usage"}},
	{"internal/session/jsstore", []string{"internal/llm", "internal/bus/natsbus", "internal/config", "internal/session"}},
	{"internal/memory", []string{"internal/llm", "internal/history", "internal/workspace", "internal/filelock", "internal/usage"}},
	{"internal/provider", []string{"internal/llm", "internal/config", "internal/logging", "internal/provider", "internal/bytesize", "internal/usage"}},
	{"internal/tools", []string{"internal/llm", "internal/bus", "internal/config", "internal/logging", "internal/workspace", "internal/tools", "internal/bytesize"}},
	{"internal/channels", []string{"internal/llm", "internal/bus", "internal/config", "internal/channels", "internal/inbox", "internal/commands", "internal/bytesize", "internal/filelock", "internal/atomicfile", "internal/workspace", "internal/usage"}},
	{"internal/channels/pairingkv", []string{"internal/bus/natsbus", "internal/config", "internal/channels"}},
	{"internal/channels/cursorkv", []string{"internal/bus/natsbus", "internal/config"}},
	// The lab: fakes and helpers for tests (and the bench module, bench/).
	// Nothing in the product imports it (TestImportLayering below).
	{"internal/testkit/fakes", []string{"internal/llm", "internal/testkit/fakes"}},
	{"internal/testkit/bustest", []string{"internal/llm", "internal/bus"}},
	{"internal/testkit/pairingtest", []string{"internal/channels"}},
	{"internal/testkit/filelocktest", nil},
	{"internal/testkit/wstest", []string{"internal/workspace"}},
	{"internal/testkit/golden", nil},
	{"internal/pprofserve", nil},
	{"internal/httpguard", nil},
	{"internal/api", []string{"internal/llm", "internal/bus", "internal/channels", "internal/config", "internal/inbox"}},
	{"internal/web", []string{"internal/llm", "internal/bus", "internal/config", "internal/channels", "internal/session", "internal/history", "internal/logging", "internal/workspace", "internal/inbox", "internal/bytesize", "internal/atomicfile", "internal/usage"}},
	{"internal/mcp", []string{"internal/llm", "internal/config", "internal/logging", "internal/tools", "internal/channels/clock"}},
	// The daemon is the only composition root: the command parses flags,
	// loads the config and prints what the daemon built or found (doctor,
	// status, pairing included), so no command builds a provider, a channel
	// or a store of its own and checks something the gateway does not run.
	// It keeps the sandbox, a leaf: the hidden launcher must run first in
	// main, and hardening is of the process itself.
	{"cmd/nanobot", []string{"internal/daemon", "internal/config", "internal/logging", "internal/sandbox"}},
}

// forbidden are imports no package but the daemon and the commands may make.
var forbidden = map[string][]string{
	"internal/agent": {"internal/channels", "internal/daemon", "internal/provider/", "internal/config", "internal/testkit/fakes"},
}

func TestImportLayering(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	checked := 0
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		pkg := strings.TrimPrefix(fields[0], module)
		var internal []string
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, module) {
				internal = append(internal, strings.TrimPrefix(imp, module))
			}
		}
		for _, imp := range internal {
			if strings.HasPrefix(imp, "internal/daemon") && !strings.HasPrefix(pkg, "cmd/") {
				t.Errorf("%s imports %s: only commands may use the daemon", pkg, imp)
			}
			// go list's Imports are the non-test imports: a _test.go file
			// may use the lab, product code may not.
			if strings.HasPrefix(imp, "internal/testkit/") && !strings.HasPrefix(pkg, "internal/testkit/") {
				t.Errorf("%s imports %s: the testkit is for tests (and the bench module) only", pkg, imp)
			}
		}
		for _, bad := range forbidden[pkg] {
			for _, imp := range internal {
				if strings.HasPrefix(imp, bad) {
					t.Errorf("%s must not import %s", pkg, imp)
				}
			}
		}
		rule, ok := ruleFor(pkg)
		if !ok {
			continue
		}
		checked++
		for _, imp := range internal {
			if !permitted(imp, rule) {
				t.Errorf("%s imports %s; allowed: %v", pkg, imp, rule)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d packages matched a rule; is the module path right?", checked)
	}
}

// TestNATSServerNotLinked keeps the embedded NATS server (internal/testkit/fakes/natsfake)
// out of the daemon: it is for tests and the bench; nanobot only links the client.
func TestNATSServerNotLinked(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "./cmd/nanobot").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/nats-io/nats-server") || strings.HasSuffix(dep, "internal/testkit/fakes/natsfake") {
			t.Errorf("cmd/nanobot links %s", dep)
		}
	}
}

// TestPprofOnlyWithTag keeps the profiling server out of release builds:
// only -tags nanobot_pprof (bench/cmd/nanobot-bench -profile) links it.
func TestPprofOnlyWithTag(t *testing.T) {
	for _, tags := range []string{"", "nanobot_pprof"} {
		out, err := exec.Command("go", "list", "-tags", tags, "-deps", "./cmd/nanobot").Output()
		if err != nil {
			t.Fatalf("go list -tags %q: %v", tags, err)
		}
		deps := strings.Fields(string(out))
		linked := slices.Contains(deps, module+"internal/pprofserve") && slices.Contains(deps, "net/http/pprof")
		if linked != (tags != "") {
			t.Errorf("-tags %q: pprof linked = %v", tags, linked)
		}
	}
}

// TestBenchModuleApart keeps the bench and the floor in their own module
// (bench/go.mod), so the product's go.mod and `go test ./...` leave them out,
// and keeps that module building this tree (replace => ../), not a
// published nanobot, so the bench measures the code beside it.
func TestBenchModuleApart(t *testing.T) {
	out, err := exec.Command("go", "list", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, module+"bench/") {
			t.Errorf("the product module holds %s; it belongs to bench/go.mod", pkg)
		}
	}
	list := exec.Command("go", "list", "-m", "-f", "{{.Path}} {{with .Replace}}{{.Path}}{{end}}", strings.TrimSuffix(module, "/"))
	list.Dir = "bench"
	out, err = list.Output()
	if err != nil {
		t.Fatalf("go list -m in bench/: %v", err)
	}
	if got, want := strings.TrimSpace(string(out)), strings.TrimSuffix(module, "/")+" ../"; got != want {
		t.Errorf("bench/go.mod resolves the product as %q, want %q", got, want)
	}
}

func ruleFor(pkg string) ([]string, bool) {
	best, found := -1, false
	var rule []string
	for _, a := range allowed {
		if (pkg == a.pkg || strings.HasPrefix(pkg, a.pkg+"/")) && len(a.pkg) > best {
			best, rule, found = len(a.pkg), a.imports, true
		}
	}
	return rule, found
}

func permitted(imp string, rule []string) bool {
	for _, r := range rule {
		if imp == r || strings.HasPrefix(imp, r+"/") {
			return true
		}
	}
	return false
}
