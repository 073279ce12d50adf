package main

import (
	"os"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i + 1)
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one", []time.Duration{7}, 99, 7},
		{"p50 of 100", hundred, 50, 50},
		{"p90 of 100", hundred, 90, 90},
		{"p99 of 100", hundred, 99, 99},
		{"p100 of 100", hundred, 100, 100},
		{"p50 of 3", []time.Duration{1, 2, 3}, 50, 2},
		{"p99 of 3", []time.Duration{1, 2, 3}, 99, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("percentile(%v) = %v, want %v", tt.p, got, tt.want)
			}
		})
	}
}

func TestSummariseSortsACopy(t *testing.T) {
	in := []time.Duration{5, 1, 4, 2, 3}
	l := summarise(in)
	if l.N != 5 || l.P50 != 3 || l.Max != 5 || l.P99 != 5 {
		t.Errorf("summarise = %+v", l)
	}
	if in[0] != 5 {
		t.Error("summarise sorted its input in place")
	}
}

func TestMedianAndSpread(t *testing.T) {
	tests := []struct {
		in          []float64
		med, lo, hi float64
	}{
		{nil, 0, 0, 0},
		{[]float64{3}, 3, 3, 3},
		{[]float64{9, 1, 5}, 5, 1, 9},
		{[]float64{4, 1, 3, 2}, 2, 1, 4}, // lower middle: a measured value
	}
	for _, tt := range tests {
		lo, hi := spread(tt.in)
		if m := median(tt.in); m != tt.med || lo != tt.lo || hi != tt.hi {
			t.Errorf("%v: median %v spread %v..%v, want %v %v..%v", tt.in, m, lo, hi, tt.med, tt.lo, tt.hi)
		}
	}
}

func TestParseStatus(t *testing.T) {
	good := "Name:\tnanobot\nVmHWM:\t   20480 kB\nVmRSS:\t   10240 kB\nRssAnon:\t    6144 kB\nRssFile:\t    4096 kB\nThreads:\t7\n"
	m, err := parseStatus([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS != 10<<20 || m.Peak != 20<<20 || m.Anon != 6<<20 || m.File != 4<<20 || m.Threads != 7 {
		t.Errorf("parseStatus = %+v", m)
	}
	for name, bad := range map[string]string{
		"missing field": "VmRSS:\t1 kB\n",
		"not a number":  "VmRSS:\tx kB\nVmHWM:\t1 kB\nRssAnon:\t1 kB\nRssFile:\t1 kB\n",
		"no unit":       "VmRSS:\t1\nVmHWM:\t1 kB\nRssAnon:\t1 kB\nRssFile:\t1 kB\n",
	} {
		if _, err := parseStatus([]byte(bad)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestParseStat(t *testing.T) {
	// The name holds ") (" and spaces: fields are counted after the last ')'.
	line := "4242 (nano bot) (x)) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 123 456 789"
	got, err := parseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if got != 300*clockTick {
		t.Errorf("cpu = %v, want %v", got, 300*clockTick)
	}
	for _, bad := range []string{"no parenthesis", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 10 x 5 0"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// readCPU counts the CPU a process used. /proc/<pid>/stat floors user and
// system time to 10 ms ticks each, so after 100 ms of work (by getrusage,
// which counts in nanoseconds) it must show at least 80 ms more; enough
// work makes the figure certain where a few fast turns would not be.
func TestReadCPUCountsTheWorkDone(t *testing.T) {
	const work = 100 * time.Millisecond
	before, err := readCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	from := selfCPU()
	sink := 0
	for selfCPU()-from < work {
		for i := range 100_000 {
			sink += i
		}
	}
	after, err := readCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if d := after - before; d < work-2*clockTick {
		t.Errorf("readCPU grew by %v over %v of work (sink %d)", d, work, sink)
	}
}
