package main

import (
	"strings"
	"testing"
)

func TestParseCachegrindSummary(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want uint64
		ok   bool
	}{
		{"cachegrind 3.19, cache simulation off", "desc: I1 cache: none\ncmd: /tmp/nb gateway\nevents: Ir\nfl=/x.go\n1 2\nsummary: 10388231974\n", 10388231974, true},
		{"more events after Ir", "events: Ir Dr Dw\nsummary: 42 7 9\n", 42, true},
		{"no summary: the gateway was killed", "events: Ir\nfl=/x.go\n", 0, false},
		{"not a number", "summary: lots\n", 0, false},
		{"empty summary", "summary:\n", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseCachegrindSummary(strings.NewReader(tt.in))
			if (err == nil) != tt.ok || got != tt.want {
				t.Fatalf("parseCachegrindSummary = %d, %v; want %d, ok %v", got, err, tt.want, tt.ok)
			}
		})
	}
}

func TestPerTurnIsTheDifference(t *testing.T) {
	// Start-up, warm-up and shutdown (the 1,000,000 both runs share) cancel out.
	short := instructionsRun{Turns: 100, Instructions: 1_000_000 + 100*2_000}
	long := instructionsRun{Turns: 400, Instructions: 1_000_000 + 400*2_000}
	got, err := perTurn(short, long)
	if err != nil || got != 2_000 {
		t.Fatalf("perTurn = %v, %v; want 2000", got, err)
	}
	for _, bad := range []instructionsRun{{Turns: 100, Instructions: 5_000_000}, {Turns: 90, Instructions: 5_000_000}, {Turns: 400, Instructions: 900_000}} {
		if _, err := perTurn(short, bad); err == nil {
			t.Errorf("perTurn(%+v, %+v) gave no error", short, bad)
		}
	}
}

func TestCachegrindCommand(t *testing.T) {
	c := &cachegrind{valgrind: "/usr/bin/valgrind", out: "/tmp/x/run-0.out"}
	name, args := c.command("/tmp/nanobot", []string{"--config", "c.json", "gateway"})
	want := "/usr/bin/valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/tmp/x/run-0.out /tmp/nanobot --config c.json gateway"
	if got := name + " " + strings.Join(args, " "); got != want {
		t.Fatalf("command:\n got %s\nwant %s", got, want)
	}
}
