package daemon

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"time"

	"github.com/nanobot-go/nanobot/internal/channels/kinds"
	"github.com/nanobot-go/nanobot/internal/config"
)

// doctorTimeout bounds each network check: a provider or platform that
// takes longer is as good as unreachable for a chat bot.
const doctorTimeout = 15 * time.Second

// Verdict is a doctor finding's verdict.
type Verdict int

const (
	VerdictOK Verdict = iota
	VerdictSkip
	VerdictWarn
	VerdictFail
)

func (v Verdict) String() string {
	return [...]string{"ok", "skip", "warn", "FAIL"}[v]
}

// Finding is the result of one check: what was checked, what was found and,
// when something is wrong, how to fix it.
type Finding struct {
	Name    string
	Verdict Verdict
	Detail  string
	Fix     string
}

// Report is what `nanobot doctor` found. Its texts may hold secrets (an
// error quoting a URL with a password): redact them against Secrets before
// showing them.
type Report struct {
	Findings []Finding
	Secrets  []string
}

func (r *Report) add(name string, v Verdict, detail, fix string) {
	r.Findings = append(r.Findings, Finding{name, v, detail, fix})
}

// Count is the number of findings with verdict v.
func (r *Report) Count(v Verdict) int {
	n := 0
	for _, f := range r.Findings {
		if f.Verdict == v {
			n++
		}
	}
	return n
}

// Doctor checks the config at path and what the gateway would build from
// it, with the gateway's own constructors (providers, channels, MCP
// servers, the bus, the exec sandbox), so it checks what the gateway runs.
// It runs every check and lists every finding: each configuration problem
// is a finding of its own, and the checks after it run on what could be
// read (the defaults where the file could not be). version is what MCP
// servers are told the client is.
func Doctor(ctx context.Context, path, version string) *Report {
	r := &Report{}
	cfg, errs, err := config.LoadPartial(path, kinds.Sections()...)
	if err != nil {
		fix := "correct the file named above; config.example.yaml documents every key"
		if errors.Is(err, fs.ErrNotExist) {
			fix = "run `nanobot onboard` to write a starter config, or pass --config PATH"
		}
		r.add("config", VerdictFail, err.Error(), fix)
		return r
	}
	if verr := cfg.Validate(); verr != nil && len(errs) == 0 {
		errs = unjoin(verr)
	}
	const fix = "correct the key named; config.example.yaml documents every key"
	for _, e := range errs {
		r.add("config", VerdictFail, e.Error(), fix)
	}
	data := filepath.Dir(path)
	r.Secrets = Secrets(cfg, data)
	switch {
	case len(errs) == 0:
		r.add("config", VerdictOK, path+" is valid", "")
	default:
		r.add("defaults", VerdictWarn, "the checks below use what could be read of "+path+" and the defaults elsewhere", "fix the config problems above first")
	}
	if err := config.CheckPermissions(path); err != nil {
		r.add("config mode", VerdictWarn, err.Error(), "chmod 600 "+path)
	}
	if err := config.CheckPermissions(SecretsPath(data)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		r.add("secrets mode", VerdictWarn, err.Error(), "chmod 600 "+SecretsPath(data))
	}
	checkDirs(r, cfg, data)
	checkListen(ctx, r, cfg.Gateway.Listen)
	checkProviders(ctx, r, cfg)
	checkChannels(ctx, r, cfg, data)
	checkMCP(ctx, r, cfg, version)
	checkBus(ctx, r, cfg)
	checkSandbox(r, cfg)
	return r
}

// unjoin splits an errors.Join into its errors.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
