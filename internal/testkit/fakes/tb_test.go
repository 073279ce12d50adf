package fakes_test

import (
	"bytes"
	"log"
	"slices"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes"
)

func TestStandaloneRunsCleanupsLastFirstOnce(t *testing.T) {
	var got []int
	var s fakes.Standalone
	for i := range 3 {
		s.Cleanup(func() { got = append(got, i) })
	}
	s.Close()
	s.Close()
	if !slices.Equal(got, []int{2, 1, 0}) {
		t.Errorf("cleanups ran as %v, want [2 1 0] once", got)
	}
}

func TestStandaloneLogsAndCountsErrors(t *testing.T) {
	var buf bytes.Buffer
	s := fakes.Standalone{Log: log.New(&buf, "", 0)}
	s.Helper()
	s.Logf("hello %d", 1)
	s.Errorf("broken %s", "reply")
	s.Errorf("again")
	if s.Errors() != 2 {
		t.Errorf("Errors() = %d, want 2", s.Errors())
	}
	if out := buf.String(); out != "hello 1\nerror: broken reply\nerror: again\n" {
		t.Errorf("log = %q", out)
	}
	var quiet fakes.Standalone // nil Log: nothing written, nothing panics
	quiet.Logf("dropped")
}

func TestStandaloneFatalfPanicsWithTheMessage(t *testing.T) {
	defer func() {
		if r, _ := recover().(string); !strings.Contains(r, "unknown channel 42") {
			t.Errorf("recovered %q, want the Fatalf message", r)
		}
	}()
	var s fakes.Standalone
	s.Fatalf("unknown channel %d", 42)
	t.Error("Fatalf returned")
}
