package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/testkit/gobuild"
)

// TestInitProbesStopBeforeMain builds the init scenario's probes as the
// test binary was built (gobuild.Flags, CGO as configured: the release
// build's CGO_ENABLED=0 and -trimpath would compile the whole tree once
// more, and the build cache already holds it this way) and measures each
// once: every probe must reach its last initialiser and wait there, and the
// figures must grow with what the probe links.
func TestInitProbesStopBeforeMain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var log bytes.Buffer
	progress := func(format string, args ...any) { log.WriteString(format + "\n") }
	built, err := buildProbes(ctx, t.TempDir(), goBuild{flags: append(gobuild.Flags(), "-ldflags=-s -w")}, progress)
	if err != nil {
		t.Fatalf("build probes: %v\n%s", err, log.String())
	}
	var names []string
	var rs []initResult
	for _, p := range built {
		names = append(names, p.Name)
		r, err := measureProbe(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if r.Memory.RSS <= 0 || r.Memory.File <= 0 || r.Text.RSS <= 0 || r.Text.Size < r.Text.RSS || r.ReadOnly.Size <= 0 {
			t.Errorf("probe %s: %+v", p.Name, r)
		}
		// The segments a trace would be counted against are the mappings
		// smaps shows, up to each segment's rounding to whole pages at
		// either end.
		code, ro, err := loadSegments(p.bin)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name string
			s    segments
			m    region
		}{{"code", code, r.Text}, {"read-only data", ro, r.ReadOnly}} {
			if n := c.s.size(); n <= 0 || n > c.m.Size || c.m.Size-n >= int64(len(c.s))*2*4096 {
				t.Errorf("probe %s: %s segment %d bytes, mapping %d", p.Name, c.name, n, c.m.Size)
			}
		}
		rs = append(rs, r)
	}
	if got := strings.Join(names, ","); got != "empty,fixed,libraries,nanobot" {
		t.Fatalf("probes = %s", got)
	}
	for i := 1; i < len(rs); i++ {
		a, b := rs[i-1], rs[i]
		if b.Binary <= a.Binary || b.Memory.File <= a.Memory.File || b.Text.Size <= a.Text.Size {
			t.Errorf("%s (binary %d, file-backed %d, code %d) is not larger than %s (%d, %d, %d)",
				b.Probe, b.Binary, b.Memory.File, b.Text.Size, a.Probe, a.Binary, a.Memory.File, a.Text.Size)
		}
	}
	fa, err := faultAround(built[len(built)-1].bin)
	if err != nil {
		t.Fatal(err)
	}
	if fa < 4096 || fa%4096 != 0 {
		t.Errorf("fault-around = %d bytes, want a positive number of pages", fa)
	}
	var out bytes.Buffer
	printInit(&out, rs, fa, touched{})
	for _, want := range []string{"### Before main", "| empty | ", "| fixed | ", "| libraries | ", "| nanobot | ", "- nanobot: cmd/nanobot itself"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestBinaryRegionsSumsTheBinarysMappingsByPermission(t *testing.T) {
	smaps := `00400000-00c9b000 r-xp 00000000 fe:00 10011249                           /tmp/nb
Size:               8812 kB
Rss:                7964 kB
00c9b000-01632000 r--p 0089b000 fe:00 10011249                           /tmp/nb
Size:              10076 kB
Rss:                7644 kB
01632000-016c3000 rw-p 01232000 fe:00 10011249                           /tmp/nb
Size:                580 kB
Rss:                 516 kB
016c3000-03709000 rw-p 00000000 00:00 0 
Size:              32792 kB
Rss:                 116 kB
7f0000000000-7f0000001000 r--p 00000000 fe:00 42                           /tmp/nb-other
Size:                  4 kB
Rss:                   4 kB
`
	text, ro, data, err := binaryRegions([]byte(smaps), "/tmp/nb")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		got, want region
	}{
		{"code", text, region{8812 << 10, 7964 << 10}},
		{"read-only data", ro, region{10076 << 10, 7644 << 10}},
		{"data", data, region{580 << 10, 516 << 10}},
	} {
		if c.got != c.want {
			t.Errorf("%s = %+v, want %+v", c.name, c.got, c.want)
		}
	}
	if _, _, _, err := binaryRegions([]byte(smaps), "/tmp/absent"); err == nil {
		t.Error("no error for a binary smaps does not list")
	}
}

func TestParseAccessReadsLackeyLines(t *testing.T) {
	tests := []struct {
		line       string
		addr, size uint64
		ok         bool
	}{
		{"I  0048eca0,5\n", 0x48eca0, 5, true},
		{" L 1fff000750,8\n", 0x1fff000750, 8, true},
		{" S 016c6310,8\n", 0x16c6310, 8, true},
		{" M 016c6310,4", 0x16c6310, 4, true},
		{"==3177== Command: ./nb version\n", 0, 0, false},
		{"==3177== \n", 0, 0, false},
		{"I  0048eca0\n", 0, 0, false},
		{"I  0048zz00,5\n", 0, 0, false},
		{" X 0048eca0,5\n", 0, 0, false},
		{"I  0048eca0,0\n", 0, 0, false},
		{"I  12345678901234567,4\n", 0, 0, false},
	}
	for _, tt := range tests {
		addr, size, ok := parseAccess([]byte(tt.line))
		if addr != tt.addr || size != tt.size || ok != tt.ok {
			t.Errorf("parseAccess(%q) = %#x, %d, %v; want %#x, %d, %v", tt.line, addr, size, ok, tt.addr, tt.size, tt.ok)
		}
	}
}

func TestCountPagesCountsBothEndsOfAnAccess(t *testing.T) {
	log := "==1== Lackey\n" +
		"I  00401000,5\n" + // page 0x401
		"I  00401ffe,4\n" + // crosses into page 0x402
		" L 00c9b010,8\n" + // page 0xc9b
		" S 00c9b018,8\n" + // the same page again
		"==1== " + strings.Repeat("x", 2<<20) + "\n" + // longer than the reader's buffer
		" M 7fff0000,4\n" // page 0x7fff0
	pages := map[uint64]bool{}
	if err := countPages(strings.NewReader(log), pages); err != nil {
		t.Fatal(err)
	}
	want := []uint64{0x401, 0x402, 0xc9b, 0x7fff0}
	if len(pages) != len(want) {
		t.Errorf("pages = %v, want %#x", pages, want)
	}
	for _, p := range want {
		if !pages[p] {
			t.Errorf("page %#x not counted; pages = %v", p, pages)
		}
	}
}

func TestPageTracerSortsPagesIntoCodeAndReadOnlyData(t *testing.T) {
	code, ros, err := loadSegments(nanobot)
	if err != nil {
		t.Fatal(err)
	}
	// The read-only data proper is the last read-only segment; a
	// dynamically linked binary has headers in a first one.
	ro := ros[len(ros)-1]
	tr, err := newPageTracer()
	if err != nil {
		t.Fatal(err)
	}
	// Lines as lackey writes them: two code pages in one 64 KiB window
	// (the second access crosses into the next page), one read-only page
	// twice, and accesses outside both segments (the stack, the heap).
	w := func(kind string, addr uint64, size int) {
		if _, err := fmt.Fprintf(tr.w, "%s %08x,%d\n", kind, addr, size); err != nil {
			t.Fatal(err)
		}
	}
	base := (code[0].lo + 0x10000) &^ 0xffff
	w("I ", base, 4)
	w("I ", base+0xffe, 4)
	w(" L", ro.lo+0x20, 8)
	w(" S", ro.lo+0x40, 8)
	w(" L", 0x1fff000750, 8)
	w(" M", ro.hi+0x100000, 4)
	tr.started()
	got, err := tr.finish(nanobot)
	if err != nil {
		t.Fatal(err)
	}
	want := touched{Code: 2 * 4096, ReadOnly: 4096, Windows: 2}
	if got != want {
		t.Errorf("touched = %+v, want %+v", got, want)
	}
}

func TestAwaitCue(t *testing.T) {
	blocked, w := io.Pipe()
	defer func() { _ = w.Close() }()
	tests := []struct {
		name   string
		stdout io.Reader
		want   string // "" for the cue
	}{
		{"the cue", strings.NewReader("\n"), ""},
		{"ended before it", strings.NewReader(""), "ended before its last initialiser"},
		{"nothing in time", blocked, "no cue from its last initialiser in 50ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := awaitCue(context.Background(), tt.stdout, 50*time.Millisecond)
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("awaitCue = %v, want %q", err, tt.want)
			}
		})
	}
}
