package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

// report holds every run of every scenario.
type report struct {
	Started, Finished time.Time
	Machine           machine
	Options           string
	BinaryBytes       int64
	Idle              []idleResult
	Load              []loadResult
	History           []historyResult
	Stream            []latencies
	API               []loadResult
	Web               []webResult
	Scale             []scaleResult
	Instructions      []instructionsResult
	Init              []initResult
	// FaultAround is what one read of a cached file's mapping brings into
	// RSS (the init scenario).
	FaultAround int64
	// IdleTouched is what the idle gateway read of its binary (the init
	// scenario, with valgrind).
	IdleTouched touched
}

// machine describes where the figures were taken.
type machine struct {
	CPUs     int
	CPUModel string
	Kernel   string
	Go       string
	LoadAvg  string // at the start: other jobs on a shared machine show here
}

func describeMachine() machine {
	m := machine{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(data))
	}
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAvg = strings.Join(strings.Fields(string(data))[:3], " ")
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		_ = f.Close()
	}
	return m
}

// print writes the report as Markdown: one table per scenario, each figure
// the median over the runs with the smallest and largest run beside it.
func (rep *report) print(w io.Writer) {
	m := rep.Machine
	fmt.Fprintf(w, "## nanobot-bench %s\n\n", rep.Started.UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "Machine: %d CPUs (%s), kernel %s, %s, load average at start %s.  \n", m.CPUs, m.CPUModel, m.Kernel, m.Go, m.LoadAvg)
	fmt.Fprintf(w, "Options: %s.  \nBinary (stripped): %.1f MB (%d bytes).  \n", rep.Options, float64(rep.BinaryBytes)/1e6, rep.BinaryBytes)
	fmt.Fprintf(w, "Every figure is the median of the runs, with [lowest – highest run] beside it.\n\n")

	if len(rep.Idle) > 0 {
		col := func(f func(idleResult) float64) string {
			xs := make([]float64, len(rep.Idle))
			for i, r := range rep.Idle {
				xs[i] = f(r)
			}
			return withSpread(xs, "%.1f")
		}
		ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
		fmt.Fprintf(w, "### Startup and idle memory (Telegram and Discord enabled), %d runs\n\n", len(rep.Idle))
		fmt.Fprintln(w, "| figure | value |\n| --- | --- |")
		fmt.Fprintf(w, "| first start (installs the workspace): exec → /healthz answers (ms) | %s |\n", col(func(r idleResult) float64 { return ms(r.First.Healthz) }))
		fmt.Fprintf(w, "| first start: exec → first getUpdates (ms) | %s |\n", col(func(r idleResult) float64 { return ms(r.First.FirstPoll) }))
		fmt.Fprintf(w, "| restart: exec → /healthz answers (ms) | %s |\n", col(func(r idleResult) float64 { return ms(r.Ready.Healthz) }))
		fmt.Fprintf(w, "| restart: exec → first getUpdates (ms) | %s |\n", col(func(r idleResult) float64 { return ms(r.Ready.FirstPoll) }))
		fmt.Fprintf(w, "| restart: exec → Telegram polling and Discord READY (ms) | %s |\n", col(func(r idleResult) float64 { return ms(r.AllReady) }))
		fmt.Fprintf(w, "| idle RSS (MiB) | %s |\n", col(func(r idleResult) float64 { return mib(r.Memory.RSS) }))
		fmt.Fprintf(w, "| of which anonymous (MiB) | %s |\n", col(func(r idleResult) float64 { return mib(r.Memory.Anon) }))
		fmt.Fprintf(w, "| of which file-backed (MiB) | %s |\n", col(func(r idleResult) float64 { return mib(r.Memory.File) }))
		printWorkingSet(w, rep.Idle, col)
		fmt.Fprintln(w)
	}
	if len(rep.Init) > 0 {
		printInit(w, rep.Init, rep.FaultAround, rep.IdleTouched)
	}
	if len(rep.Instructions) > 0 {
		xs := make([]float64, len(rep.Instructions))
		for i, r := range rep.Instructions {
			xs[i] = r.PerTurn / 1e6
		}
		fmt.Fprintf(w, "### Instructions per turn: one chat, closed loop, under cachegrind (GOMAXPROCS 1), %d runs\n\n", len(rep.Instructions))
		fmt.Fprintln(w, "| figure | value |\n| --- | --- |")
		fmt.Fprintf(w, "| instructions per turn (millions) | %s |\n\n", withSpread(xs, "%.3f"))
	}
	if len(rep.Load) > 0 {
		fmt.Fprintln(w, "### Load: closed loop, zero-latency model, streaming off")
		fmt.Fprintln(w)
		printLoad(w, "chats", rep.Load, func(r loadResult) string { return fmt.Sprint(r.Chats) })
	}
	if len(rep.API) > 0 {
		fmt.Fprintln(w, "### API: closed loop through POST /v1/chat/completions (not streamed), zero-latency model")
		fmt.Fprintln(w)
		printLoad(w, "clients", rep.API, func(r loadResult) string { return fmt.Sprint(r.Chats) })
	}
	if len(rep.History) > 0 {
		printHistory(w, rep.History)
	}
	if len(rep.Scale) > 0 {
		printScale(w, rep.Scale)
	}
	if len(rep.Stream) > 0 {
		fmt.Fprintf(w, "### Streaming: model's first token → first message shown, %d runs\n\n", len(rep.Stream))
		var p50, max []float64
		for _, l := range rep.Stream {
			p50, max = append(p50, float64(l.P50)/1e6), append(max, float64(l.Max)/1e6)
		}
		fmt.Fprintln(w, "| figure | value |\n| --- | --- |")
		fmt.Fprintf(w, "| median over a run's turns (ms) | %s |\n", withSpread(p50, "%.2f"))
		fmt.Fprintf(w, "| slowest turn of a run (ms) | %s |\n\n", withSpread(max, "%.2f"))
	}
	if len(rep.Web) > 0 {
		printWeb(w, rep.Web)
	}
}

// printInit prints one row per probe, in the order they ran.
func printInit(w io.Writer, rs []initResult, faultAround int64, idle touched) {
	var names []string
	groups := map[string][]initResult{}
	for _, r := range rs {
		if _, ok := groups[r.Probe]; !ok {
			names = append(names, r.Probe)
		}
		groups[r.Probe] = append(groups[r.Probe], r)
	}
	fmt.Fprintf(w, "### Before main: memory once the package initialisers have run, %d runs\n\n", len(groups[names[0]]))
	fmt.Fprintf(w, "Each probe is built with the release flags and one last initialiser that waits; its memory is read %v after.  \n", initSettle)
	fmt.Fprintf(w, "Kernel fault-around: a read of one byte of a cached file's mapping made %d KiB resident.\n\n", faultAround>>10)
	fmt.Fprintln(w, "| probe | binary (MB) | VmRSS (MiB) | anonymous (MiB) | file-backed (MiB) | code resident / mapped (MiB) | read-only data resident / mapped (MiB) |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- |")
	for _, n := range names {
		g := groups[n]
		col := func(f func(initResult) float64) string {
			xs := make([]float64, len(g))
			for i, r := range g {
				xs[i] = f(r)
			}
			return withSpread(xs, "%.1f")
		}
		fmt.Fprintf(w, "| %s | %.1f | %s | %s | %s | %s / %.1f | %s / %.1f |\n", n, float64(g[0].Binary)/1e6,
			col(func(r initResult) float64 { return mib(r.Memory.RSS) }),
			col(func(r initResult) float64 { return mib(r.Memory.Anon) }),
			col(func(r initResult) float64 { return mib(r.Memory.File) }),
			col(func(r initResult) float64 { return mib(r.Text.RSS) }), mib(g[0].Text.Size),
			col(func(r initResult) float64 { return mib(r.ReadOnly.RSS) }), mib(g[0].ReadOnly.Size),
		)
	}
	fmt.Fprintln(w)
	for _, n := range names {
		fmt.Fprintf(w, "- %s: %s\n", n, groups[n][0].What)
	}
	fmt.Fprintln(w)
	if groups[names[0]][0].Touched.Code == 0 {
		fmt.Fprintln(w, "What the initialisers read, page by page, is not traced: valgrind is not installed (apt-get install valgrind).")
		fmt.Fprintln(w)
		return
	}
	fmt.Fprintln(w, "What each probe read of its binary before main, from a trace of every access (valgrind's lackey, first run), in 4 KiB pages, against the 64 KiB windows those pages fall in, which fault-around makes resident:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| probe | code read (MiB) | read-only data read (MiB) | together (MiB) | their 64 KiB windows (MiB) |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- |")
	for _, n := range names {
		t := groups[n][0].Touched
		fmt.Fprintf(w, "| %s | %.2f | %.2f | %.2f | %.2f |\n", n, mib(t.Code), mib(t.ReadOnly), mib(t.Code+t.ReadOnly), float64(t.Windows)/16)
	}
	if idle.Code > 0 {
		fmt.Fprintf(w, "| the idle gateway: a restart with Telegram and Discord, from exec to -settle after ready | %.2f | %.2f | %.2f | %.2f |\n",
			mib(idle.Code), mib(idle.ReadOnly), mib(idle.Code+idle.ReadOnly), float64(idle.Windows)/16)
	}
	fmt.Fprintln(w)
}

// printWeb prints the web page's figures.
func printWeb(w io.Writer, rs []webResult) {
	col := func(format string, f func(webResult) float64) string {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = f(r)
		}
		return withSpread(xs, format)
	}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	fmt.Fprintf(w, "### Web page, %d runs\n\n", len(rs))
	fmt.Fprintln(w, "| figure | value |\n| --- | --- |")
	fmt.Fprintf(w, "| model's first token → first draft visible in Chromium, median over a run's turns (ms) | %s |\n", col("%.2f", func(r webResult) float64 { return ms(r.FirstVisible.P50) }))
	fmt.Fprintf(w, "| same, slowest turn of a run (ms) | %s |\n", col("%.2f", func(r webResult) float64 { return ms(r.FirstVisible.Max) }))
	fmt.Fprintf(w, "| gateway CPU per streamed turn, 1 client (µs) | %s |\n", col("%.0f", func(r webResult) float64 { return float64(r.CPUAlone) / 1e3 }))
	fmt.Fprintf(w, "| gateway CPU per streamed turn, 1 + %d clients on the same conversation (µs) | %s |\n", rs[0].Clients, col("%.0f", func(r webResult) float64 { return float64(r.CPUWatched) / 1e3 }))
	fmt.Fprintf(w, "| increase with the clients (%%) | %s |\n", col("%.0f", func(r webResult) float64 {
		return 100 * (float64(r.CPUWatched) - float64(r.CPUAlone)) / float64(max(r.CPUAlone, 1))
	}))
	fmt.Fprintf(w, "| gateway CPU per streamed turn, 1 client chatting in its own conversation (µs) | %s |\n", col("%.0f", func(r webResult) float64 { return float64(r.CPUOne) / 1e3 }))
	fmt.Fprintf(w, "| gateway CPU per streamed turn, %d clients chatting at once, each in its own conversation (µs) | %s |\n", rs[0].Clients, col("%.0f", func(r webResult) float64 { return float64(r.CPUMany) / 1e3 }))
	fmt.Fprintf(w, "| increase with the concurrent clients (%%) | %s |\n", col("%.0f", func(r webResult) float64 {
		return 100 * (float64(r.CPUMany) - float64(r.CPUOne)) / float64(max(r.CPUOne, 1))
	}))
	fmt.Fprintf(w, "| page first load, gzip: index.html, style.css, app.js, api.js, sanitize.js (KB) | %s |\n", col("%.1f", func(r webResult) float64 { return float64(r.PageGzip) / 1e3 }))
	fmt.Fprintf(w, "| control panel module, gzip, loaded when opened (KB) | %s |\n\n", col("%.1f", func(r webResult) float64 { return float64(r.PanelGzip) / 1e3 }))
}

// printScale prints turns/s and end-to-end latency per number of workers.
func printScale(w io.Writer, rs []scaleResult) {
	fmt.Fprintln(w, "### Scale-out: agent workers over NATS, model answers after a fixed delay")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| agent workers | runs | turns/s | end to end p50 (ms) | end to end p99 (ms) | channels process CPU (cores) |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- |")
	var keys []int
	groups := map[int][]scaleResult{}
	for _, r := range rs {
		if _, ok := groups[r.Workers]; !ok {
			keys = append(keys, r.Workers)
		}
		groups[r.Workers] = append(groups[r.Workers], r)
	}
	for _, k := range keys {
		g := groups[k]
		col := func(format string, f func(scaleResult) float64) string {
			xs := make([]float64, len(g))
			for i, r := range g {
				xs[i] = f(r)
			}
			return withSpread(xs, format)
		}
		name := fmt.Sprint(k)
		if k == 0 {
			name = "none (one process, bus.backend: memory)"
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s |\n", name, len(g),
			col("%.1f", func(r scaleResult) float64 { return r.TurnsPerS }),
			col("%.0f", func(r scaleResult) float64 { return float64(r.EndToEnd.P50) / 1e6 }),
			col("%.0f", func(r scaleResult) float64 { return float64(r.EndToEnd.P99) / 1e6 }),
			col("%.2f", func(r scaleResult) float64 { return r.CPU.Seconds() / r.Window.Seconds() }),
		)
	}
	fmt.Fprintln(w)
}

// printLoad prints one row per group (key) with the medians of its runs.
func printLoad(w io.Writer, keyName string, rs []loadResult, key func(loadResult) string) {
	var keys []string
	groups := map[string][]loadResult{}
	for _, r := range rs {
		k := key(r)
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], r)
	}
	fmt.Fprintf(w, "| %s | runs | turns/s | added p50 (ms) | added p90 (ms) | added p99 (ms) | model's own p50 (ms) | gateway CPU/turn (µs) | gateway CPU (cores) | bench CPU (cores) | RSS median / max (MiB) | request (KiB) |\n", keyName)
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, k := range keys {
		g := groups[k]
		col := func(format string, f func(loadResult) float64) string {
			xs := make([]float64, len(g))
			for i, r := range g {
				xs[i] = f(r)
			}
			return withSpread(xs, format)
		}
		ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s | %s |\n", k, len(g),
			col("%.0f", func(r loadResult) float64 { return r.TurnsPerS }),
			col("%.2f", func(r loadResult) float64 { return ms(r.Added.P50) }),
			col("%.2f", func(r loadResult) float64 { return ms(r.Added.P90) }),
			col("%.2f", func(r loadResult) float64 { return ms(r.Added.P99) }),
			col("%.2f", func(r loadResult) float64 { return ms(r.Model.P50) }),
			col("%.0f", func(r loadResult) float64 { return float64(r.CPUPerTurn()) / 1e3 }),
			col("%.2f", func(r loadResult) float64 { return r.CPU.Seconds() / r.Window.Seconds() }),
			col("%.2f", func(r loadResult) float64 { return r.BenchCPU.Seconds() / r.Window.Seconds() }),
			col("%.1f", func(r loadResult) float64 { return mib(r.RSS.RSS) }),
			col("%.1f", func(r loadResult) float64 { return mib(r.RSSMax) }),
			col("%.1f", func(r loadResult) float64 { return float64(r.ReqBytes) / 1024 }),
		)
	}
	fmt.Fprintln(w)
}

// printHistory prints one row per session length.
func printHistory(w io.Writer, rs []historyResult) {
	var keys []int
	groups := map[int][]historyResult{}
	for _, r := range rs {
		if _, ok := groups[r.Prior]; !ok {
			keys = append(keys, r.Prior)
		}
		groups[r.Prior] = append(groups[r.Prior], r)
	}
	fmt.Fprintln(w, "### Per-turn cost against session length (one turn at a time)")
	fmt.Fprintln(w)
	if len(rs) > 0 && rs[0].Backlog {
		fmt.Fprintln(w, "Sessions seeded unconsolidated (-history-backlog): the measured turns run beside the background folding of the whole backlog.")
	} else {
		fmt.Fprintln(w, "Sessions seeded as the daemon leaves a long session: all but the last half memory window of messages consolidated.")
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| prior messages | runs | turns/run | first turn: added p50 (ms) | later turns: added p50 (ms) | added p90 (ms) | model's own p50 (ms) | gateway CPU/turn (µs) | request (KiB) |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, k := range keys {
		g := groups[k]
		col := func(format string, f func(historyResult) float64) string {
			xs := make([]float64, len(g))
			for i, r := range g {
				xs[i] = f(r)
			}
			return withSpread(xs, format)
		}
		ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
		fmt.Fprintf(w, "| %d | %d | %d | %s | %s | %s | %s | %s | %s |\n", k, len(g), g[0].Turns,
			col("%.2f", func(r historyResult) float64 { return ms(r.First.P50) }),
			col("%.2f", func(r historyResult) float64 { return ms(r.Added.P50) }),
			col("%.2f", func(r historyResult) float64 { return ms(r.Added.P90) }),
			col("%.2f", func(r historyResult) float64 { return ms(r.Model.P50) }),
			col("%.0f", func(r historyResult) float64 { return float64(r.CPUPerTurn()) / 1e3 }),
			col("%.1f", func(r historyResult) float64 { return float64(r.ReqBytes) / 1024 }),
		)
	}
	fmt.Fprintln(w)
}

// withSpread formats the median of xs and, for several runs, their range.
func withSpread(xs []float64, format string) string {
	s := fmt.Sprintf(format, median(xs))
	if len(xs) > 1 {
		lo, hi := spread(xs)
		s += fmt.Sprintf(" ["+format+" – "+format+"]", lo, hi)
	}
	return s
}

// printWorkingSet adds the idle working set rows, or says why they are
// missing.
func printWorkingSet(w io.Writer, idle []idleResult, col func(func(idleResult) float64) string) {
	for _, r := range idle {
		if r.WorkingSet.RSS == 0 {
			why := r.WorkingSetErr
			if why == "" {
				why = "-working-set 0"
			}
			fmt.Fprintf(w, "| idle working set | not measured (%s) |\n", why)
			return
		}
	}
	fmt.Fprintf(w, "| idle working set: largest RSS after the binary was paged out (MiB) | %s |\n", col(func(r idleResult) float64 { return mib(r.WorkingSet.RSS) }))
	fmt.Fprintf(w, "| of which anonymous (MiB) | %s |\n", col(func(r idleResult) float64 { return mib(r.WorkingSet.Anon) }))
	fmt.Fprintf(w, "| of which file-backed (MiB) | %s |\n", col(func(r idleResult) float64 { return mib(r.WorkingSet.File) }))
}
