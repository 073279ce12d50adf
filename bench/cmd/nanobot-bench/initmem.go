package main

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// The init scenario answers one question about idle memory: how much of it
// is there before main runs? Each probe is a program built with the release
// flags plus one last package initialiser that reports and then waits; the
// bench reads the probe's memory while it waits. The probes grow from the Go
// runtime alone to nanobot itself, so the rows show what the libraries'
// initialisers cost and what linking nanobot's code between them adds.

// probe is one program the init scenario measures.
type probe struct {
	Name string
	// What says in the report what the probe is.
	What string
	// pkg is the package to build, relative to the product module's root;
	// its directory exists (cmd/nanobot) or is created only in the overlay.
	pkg string
	// main is the source of the package's main file for a probe that has
	// no directory of its own; empty for cmd/nanobot.
	main string
}

// waitInit is the probe's last initialiser. Package main's init functions run
// after every package it imports has initialised, in the order of their
// files' names, so a file named zz_ runs last. It writes one byte, which is
// the bench's cue, and sleeps until killed (time is linked by every probe).
const waitInit = `package main

import (
	"os"
	"time"
)

func init() {
	_, _ = os.Stdout.Write([]byte{'\n'})
	for {
		time.Sleep(time.Hour)
	}
}
`

// fixedLibraries are the libraries fixed by the product owner.
var fixedLibraries = []string{
	"github.com/bwmarrin/discordgo",
	"github.com/go-telegram/bot",
	"github.com/sashabaranov/go-openai",
	"github.com/spf13/viper",
	"go.uber.org/zap",
}

// probes returns the programs to measure, from module at root. The
// libraries probe imports every package outside the module that nanobot's
// own packages import, as listed by go list.
func probes(ctx context.Context, root, module string, b goBuild) ([]probe, error) {
	list := goBuild{env: b.env}.command(ctx, root, "list", "-deps", "-f",
		`{{if .Module}}{{if .Module.Main}}{{join .Imports "\n"}}{{end}}{{end}}`, "./cmd/nanobot")
	out, err := list.Output()
	if err != nil {
		return nil, fmt.Errorf("go list the imports of ./cmd/nanobot: %w", err)
	}
	seen := map[string]bool{}
	var outside []string
	for _, p := range strings.Fields(string(out)) {
		if seen[p] || p == "C" || p == "unsafe" || p == module || strings.HasPrefix(p, module+"/") {
			continue
		}
		seen[p] = true
		outside = append(outside, p)
	}
	if len(outside) == 0 {
		return nil, fmt.Errorf("go list found no imports of ./cmd/nanobot outside %s", module)
	}
	return []probe{
		{Name: "empty", What: "the Go runtime alone", pkg: "cmd/nanobot-probe/empty", main: importing(nil)},
		{Name: "fixed", What: "the five libraries fixed by the product owner (" + strings.Join(fixedLibraries, ", ") + ")", pkg: "cmd/nanobot-probe/fixed", main: importing(fixedLibraries)},
		{Name: "libraries", What: fmt.Sprintf("every package nanobot's code imports from outside the module (%d, standard library included), none of nanobot's code", len(outside)), pkg: "cmd/nanobot-probe/libraries", main: importing(outside)},
		{Name: "nanobot", What: "cmd/nanobot itself, stopped before main", pkg: "cmd/nanobot"},
	}, nil
}

// importing is the source of a main package that imports pkgs for their
// initialisers and does nothing.
func importing(pkgs []string) string {
	var b strings.Builder
	b.WriteString("package main\n\n")
	if len(pkgs) > 0 {
		b.WriteString("import (\n")
		for _, p := range pkgs {
			fmt.Fprintf(&b, "\t_ %q\n", p)
		}
		b.WriteString(")\n\n")
	}
	b.WriteString("func main() {}\n")
	return b.String()
}

// productModule is the module path of the product, nanobot's go.mod.
const productModule = "github.com/nanobot-go/nanobot"

// productDir is the directory of the product module as the bench module
// resolves it (the replace in bench/go.mod: the repository root). The
// product and its probes are built there, with the product's own go.mod,
// so what is measured is what ships.
func productDir(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", productModule).Output()
	if err != nil {
		return "", fmt.Errorf("find the product module %s (run from bench/): %w", productModule, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" || strings.Contains(dir, "\n") {
		return "", fmt.Errorf("go list -m %s: want one directory, got %q", productModule, out)
	}
	return dir, nil
}

// builtProbe is a probe and the binary built for it.
type builtProbe struct {
	probe
	bin string
}

// buildProbes builds every probe into dir as b says. The probes' files are
// added through go build's -overlay, so the source tree is not touched.
func buildProbes(ctx context.Context, dir string, b goBuild, progress func(string, ...any)) ([]builtProbe, error) {
	root, err := productDir(ctx)
	if err != nil {
		return nil, err
	}
	ps, err := probes(ctx, root, productModule, b)
	if err != nil {
		return nil, err
	}
	var built []builtProbe
	for _, p := range ps {
		replace := map[string]string{}
		add := func(name, src string) error {
			file := filepath.Join(dir, p.Name+"-"+name)
			replace[filepath.Join(root, filepath.FromSlash(p.pkg), name)] = file
			return os.WriteFile(file, []byte(src), 0o644)
		}
		if err := add("zz_waitinit.go", waitInit); err != nil {
			return nil, err
		}
		if p.main != "" {
			if err := add("main.go", p.main); err != nil {
				return nil, err
			}
		}
		overlay := filepath.Join(dir, p.Name+"-overlay.json")
		data, err := json.Marshal(map[string]any{"Replace": replace})
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(overlay, data, 0o644); err != nil {
			return nil, err
		}
		bin := filepath.Join(dir, p.Name)
		build := b.command(ctx, root, "build", "-overlay", overlay, "-o", bin, "./"+p.pkg)
		progress("init: building probe %s: %s", p.Name, describe(build, b.env))
		var stderr bytes.Buffer
		build.Stderr = &stderr
		if err := build.Run(); err != nil {
			return nil, fmt.Errorf("build probe %s: %w\n%s", p.Name, err, stderr.String())
		}
		built = append(built, builtProbe{probe: p, bin: bin})
	}
	return built, nil
}

// region is a mapping's size and the part of it that is resident.
type region struct{ Size, RSS int64 }

// initResult is one probe's memory while it waits in its last initialiser.
type initResult struct {
	Probe  string
	What   string
	Binary int64
	Memory memory
	// Text, ReadOnly and Data are the binary's mappings: code, read-only
	// data (type data, the function table, strings), and writable data.
	Text, ReadOnly, Data region
	// Touched is counted from a valgrind trace, in the first run only, when
	// valgrind is installed; zero otherwise.
	Touched touched
}

// initSettle is how long a probe waits after its cue before its memory is
// read: the runtime's background work at start (the scavenger, sysmon) is
// done by then.
const initSettle = 300 * time.Millisecond

// measureProbe starts p, waits for its cue and reads its memory.
func measureProbe(ctx context.Context, p builtProbe) (initResult, error) {
	fi, err := os.Stat(p.bin)
	if err != nil {
		return initResult{}, err
	}
	cmd := exec.CommandContext(ctx, p.bin)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return initResult{}, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return initResult{}, fmt.Errorf("start probe %s: %w", p.Name, err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	if err := awaitCue(ctx, stdout, 30*time.Second); err != nil {
		return initResult{}, fmt.Errorf("probe %s: %w\n%s", p.Name, err, stderr.String())
	}
	select {
	case <-time.After(initSettle):
	case <-ctx.Done():
		return initResult{}, ctx.Err()
	}
	pid := cmd.Process.Pid
	r := initResult{Probe: p.Name, What: p.What, Binary: fi.Size()}
	if r.Memory, err = readMemory(pid); err != nil {
		return initResult{}, err
	}
	smaps, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return initResult{}, fmt.Errorf("read smaps of probe %s: %w", p.Name, err)
	}
	if r.Text, r.ReadOnly, r.Data, err = binaryRegions(smaps, p.bin); err != nil {
		return initResult{}, fmt.Errorf("probe %s: %w", p.Name, err)
	}
	return r, nil
}

// awaitCue waits for the byte a probe writes from its last initialiser.
func awaitCue(ctx context.Context, stdout io.Reader, limit time.Duration) error {
	cue := make(chan error, 1)
	go func() {
		_, err := io.ReadFull(stdout, make([]byte, 1))
		cue <- err
	}()
	select {
	case err := <-cue:
		if err != nil {
			return fmt.Errorf("ended before its last initialiser: %w", err)
		}
		return nil
	case <-time.After(limit):
		return fmt.Errorf("no cue from its last initialiser in %v", limit)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// binaryRegions sums the Size and Rss of the mappings of file bin in an
// smaps listing by their permissions: r-x is code, r-- read-only data, rw-
// the writable data the binary carries.
func binaryRegions(smaps []byte, bin string) (text, readOnly, data region, err error) {
	var cur *region
	found := false
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) >= 5 && strings.Contains(f[0], "-") && len(f[1]) == 4 {
			cur = nil
			if len(f) == 6 && f[5] == bin {
				found = true
				switch f[1][:3] {
				case "r-x":
					cur = &text
				case "r--":
					cur = &readOnly
				case "rw-":
					cur = &data
				}
			}
			continue
		}
		if cur == nil || len(f) != 3 || f[2] != "kB" {
			continue
		}
		kb, perr := strconv.ParseInt(f[1], 10, 64)
		if perr != nil {
			return text, readOnly, data, fmt.Errorf("smaps %s: %w", line, perr)
		}
		switch f[0] {
		case "Size:":
			cur.Size += kb << 10
		case "Rss:":
			cur.RSS += kb << 10
		}
	}
	if !found {
		return text, readOnly, data, fmt.Errorf("smaps lists no mapping of %s", bin)
	}
	return text, readOnly, data, nil
}

// faultAround measures how much a read of one byte of a file mapping brings
// into RSS when the file is in the page cache: the kernel maps the cached
// pages around a faulting one too (fault_around_bytes, 64 KiB by default),
// which is why a program's start-up RSS follows the number of 64 KiB windows
// of its binary it touches rather than the bytes.
func faultAround(file string) (int64, error) {
	// Read the file so that its pages are cached, as a binary's are.
	if _, err := os.ReadFile(file); err != nil {
		return 0, err
	}
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	const size = 1 << 20
	m, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_PRIVATE)
	if err != nil {
		return 0, fmt.Errorf("mmap %s: %w", file, err)
	}
	defer func() { _ = syscall.Munmap(m) }()
	// An atomic load, so that the compiler keeps the read.
	_ = atomic.LoadUint32((*uint32)(unsafe.Pointer(&m[0])))
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	start := fmt.Sprintf("%x-", uintptr(unsafe.Pointer(&m[0])))
	var in bool
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, start) {
			in = true
			continue
		}
		if in && strings.HasPrefix(line, "Rss:") {
			f := strings.Fields(line)
			if len(f) != 3 {
				break
			}
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, err
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("smaps lists no mapping at %s", start)
}

// touched is what a probe read of its binary before main, counted in 4 KiB
// pages from a trace of every memory access: what its RSS would be without
// fault-around.
type touched struct {
	Code, ReadOnly int64 // bytes: distinct pages times 4 KiB
	// Windows are the distinct 64 KiB windows those pages fall in, code and
	// read-only data together: what the kernel's fault-around maps.
	Windows int
}

// lackey runs the gateway under valgrind's lackey, which logs every
// instruction fetch and data access to descriptor 3 (a pageTracer's pipe).
type lackey struct{ valgrind string }

func (l lackey) command(bin string, args []string) (string, []string) {
	return l.valgrind, append([]string{"--tool=lackey", "--trace-mem=yes", "--log-fd=3", bin}, args...)
}

// pageTracer counts the pages a lackey log names as valgrind writes it into
// a pipe. The log is never stored: it runs to millions of lines.
type pageTracer struct {
	r, w  *os.File
	pages map[uint64]bool
	done  chan error
}

func newPageTracer() (*pageTracer, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	t := &pageTracer{r: r, w: w, pages: map[uint64]bool{}, done: make(chan error, 1)}
	go func() { t.done <- countPages(r, t.pages) }()
	return t, nil
}

// started closes this process's end of the log once the traced process has
// it (or failed to start), so that the log ends when that process does.
func (t *pageTracer) started() { _ = t.w.Close() }

// finish waits for the log to end (the traced process is gone) and sorts
// its pages into bin's code and read-only data.
func (t *pageTracer) finish(bin string) (touched, error) {
	_ = t.w.Close()
	err := <-t.done
	_ = t.r.Close()
	if err != nil {
		return touched{}, fmt.Errorf("read lackey's log: %w", err)
	}
	code, ro, err := loadSegments(bin)
	if err != nil {
		return touched{}, err
	}
	var res touched
	windows := map[uint64]bool{}
	for pg := range t.pages {
		addr := pg << 12
		switch {
		case code.contains(addr):
			res.Code += 4096
		case ro.contains(addr):
			res.ReadOnly += 4096
		default:
			continue
		}
		windows[addr>>16] = true
	}
	res.Windows = len(windows)
	return res, nil
}

// traceProbe runs p under lackey until the probe's cue, and counts the
// distinct pages of its code and read-only data it read.
func traceProbe(ctx context.Context, valgrind string, p builtProbe) (touched, error) {
	tr, err := newPageTracer()
	if err != nil {
		return touched{}, err
	}
	name, args := lackey{valgrind}.command(p.bin, nil)
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.ExtraFiles = []*os.File{tr.w}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tr.started()
		_, _ = tr.finish(p.bin)
		return touched{}, err
	}
	err = cmd.Start()
	tr.started()
	if err != nil {
		_, _ = tr.finish(p.bin)
		return touched{}, fmt.Errorf("valgrind %s: %w", p.Name, err)
	}
	runErr := awaitCue(ctx, stdout, 10*time.Minute)
	if runErr != nil {
		runErr = fmt.Errorf("probe %s under valgrind: %w", p.Name, runErr)
	}
	// Killed, valgrind loses at most its last unflushed line, which is
	// after the cue.
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	t, err := tr.finish(p.bin)
	if runErr != nil {
		return touched{}, runErr
	}
	return t, err
}

// traceIdleGateway starts the gateway with both channels once (which
// installs the workspace), then restarts it under lackey, waits until it is
// ready and o.settle more, and counts the pages of its binary the restart
// read from exec to then.
func traceIdleGateway(ctx context.Context, o options, valgrind string) (touched, error) {
	h, err := newHarness(o.bin, setup{Discord: true}, o.keep)
	if err != nil {
		return touched{}, err
	}
	defer h.Close()
	h.godebug = o.godebug
	if err := h.start(""); err != nil {
		return touched{}, err
	}
	if _, err := h.awaitReady(ctx, o.readyLimit); err != nil {
		return touched{}, err
	}
	if err := h.stop(30 * time.Second); err != nil {
		return touched{}, err
	}
	tr, err := newPageTracer()
	if err != nil {
		return touched{}, err
	}
	h.valgrind, h.extraFiles = lackey{valgrind}, []*os.File{tr.w}
	err = h.start("")
	tr.started()
	if err == nil {
		// Under lackey the start runs some fifty times slower.
		_, err = h.awaitReady(ctx, 10*time.Minute)
	}
	if err == nil {
		select {
		case <-time.After(o.settle):
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if h.cmd != nil {
		_ = h.cmd.Process.Kill()
		<-h.exited
	}
	t, ferr := tr.finish(o.bin)
	if err != nil {
		return touched{}, fmt.Errorf("idle gateway under lackey: %w", err)
	}
	return t, ferr
}

// span is an address range [lo, hi).
type span struct{ lo, hi uint64 }

func (s span) contains(a uint64) bool { return a >= s.lo && a < s.hi }

// segments are the address ranges of a binary's loadable segments of one
// kind: one for a static binary; a dynamically linked one (cgo, as under
// -race) has a second read-only segment before its code, for the ELF and
// program headers, the interpreter's path and the dynamic symbols.
type segments []span

func (ss segments) contains(a uint64) bool {
	return slices.ContainsFunc(ss, func(s span) bool { return s.contains(a) })
}

// size is the bytes the segments span.
func (ss segments) size() int64 {
	var n int64
	for _, s := range ss {
		n += int64(s.hi - s.lo)
	}
	return n
}

// loadSegments returns the address ranges of bin's executable and
// read-only loadable segments.
func loadSegments(bin string) (code, ro segments, err error) {
	f, err := elf.Open(bin)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", bin, err)
	}
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD {
			continue
		}
		s := span{p.Vaddr, p.Vaddr + p.Memsz}
		switch {
		case p.Flags&elf.PF_X != 0:
			code = append(code, s)
		case p.Flags&elf.PF_W == 0:
			ro = append(ro, s)
		}
	}
	if len(code) == 0 || len(ro) == 0 {
		return nil, nil, fmt.Errorf("%s: no executable or read-only segment", bin)
	}
	return code, ro, nil
}

// countPages reads a lackey log ("I  0401000,3", " L 0c9b010,8", " S ...",
// " M ...") and records the 4 KiB page of every access's first and last
// byte.
func countPages(r io.Reader, pages map[uint64]bool) error {
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadSlice('\n')
		if a, n, ok := parseAccess(line); ok {
			pages[a>>12] = true
			pages[(a+n-1)>>12] = true
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			// A line longer than the buffer is not an access; skip its rest.
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
	}
}

// parseAccess reads the address and size of one lackey access line: a
// kind (I, L, S or M) in its first two columns, a space, then "hex,decimal".
// Other lines (valgrind's own, "==pid== ...") are not accesses.
func parseAccess(line []byte) (addr, size uint64, ok bool) {
	if len(line) < 5 || line[2] != ' ' || !(line[0] == 'I' && line[1] == ' ' || line[0] == ' ' && (line[1] == 'L' || line[1] == 'S' || line[1] == 'M')) {
		return 0, 0, false
	}
	i := 3
	for i < len(line) && line[i] == ' ' {
		i++
	}
	digits := 0
	for ; i < len(line) && line[i] != ','; i++ {
		c := line[i]
		switch {
		case c >= '0' && c <= '9':
			addr = addr<<4 | uint64(c-'0')
		case c >= 'a' && c <= 'f':
			addr = addr<<4 | uint64(c-'a'+10)
		default:
			return 0, 0, false
		}
		digits++
	}
	if digits == 0 || digits > 16 || i == len(line) {
		return 0, 0, false
	}
	for i++; i < len(line) && line[i] >= '0' && line[i] <= '9'; i++ {
		size = size*10 + uint64(line[i]-'0')
	}
	if size == 0 || size > 1<<16 {
		return 0, 0, false
	}
	return addr, size, true
}
