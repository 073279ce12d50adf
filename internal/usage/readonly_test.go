package usage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/nanobot-go/nanobot/internal/clock"
)

// dirState is every file of dir with its size and modification time.
func dirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = fmt.Sprint(fi.ModTime(), " ", fi.Size())
	}
	return out
}

// A read-only ledger beside a running one sees what it recorded, today's
// unsynced records included, and the past day the keeper has not summed
// yet; it changes no file (it neither seals that day nor prunes), and
// refuses records.
func TestOpenReadOnlyBesideTheKeeper(t *testing.T) {
	dir := t.TempDir()
	c := &setClock{t: time.Date(2026, 3, 10, 23, 0, 0, 0, time.UTC)}
	keeper := openLedger(t, dir, c, time.UTC)
	ctx := context.Background()
	old := rec("telegram:1", OriginCron, "openai/gpt-4o-mini", 7, 7)
	old.Time = c.Now().AddDate(0, 0, -60) // summed into days.jsonl, read lazily
	for _, r := range []Record{
		old,
		rec("telegram:1", OriginTurn, "openai/gpt-4o-mini", 1000, 10),
		rec("telegram:1", OriginHeartbeat, "ollama/llama3", 5, 5),
	} {
		if err := keeper.Record(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	// Past midnight, the keeper's day is not summed until its next record
	// or tick: the reader must count it from the detail without summing it.
	c.Set(time.Date(2026, 3, 11, 0, 30, 0, 0, time.UTC))
	before := dirState(t, dir)
	ro, err := OpenReadOnly(dir, Options{Clock: clock.Func(c.Now), Prices: NewPriceTable(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if after := dirState(t, dir); !reflect.DeepEqual(before, after) {
		t.Errorf("opening read-only changed the directory:\nbefore %v\nafter  %v", before, after)
	}
	q := Query{Period: LastDays(c.Now(), time.UTC, 2), By: ByModel, Daily: true}
	want, err := keeper.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ro.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) || got.Total.Calls != 2 {
		t.Errorf("read-only report %+v, the keeper's %+v", got, want)
	}
	year := Query{Period: LastDays(c.Now(), time.UTC, 90)}
	if rep, err := ro.Query(year); err != nil || rep.Total.Calls != 3 || rep.Total.Input != 1012 {
		t.Errorf("read-only over 90 days: %+v %v, want the old day too (3 calls)", rep.Total, err)
	}
	if err := ro.Record(ctx, rec("x:1", OriginTurn, "openai/gpt-4o-mini", 1, 1)); !errors.Is(err, ErrClosed) {
		t.Errorf("Record on a read-only ledger = %v, want ErrClosed", err)
	}
	// The keeper goes on: it sums the day once, and a new reader counts
	// it once.
	if err := keeper.Record(ctx, rec("telegram:1", OriginTurn, "openai/gpt-4o-mini", 1, 1)); err != nil {
		t.Fatal(err)
	}
	again, err := OpenReadOnly(dir, Options{Clock: clock.Func(c.Now), Prices: NewPriceTable(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if rep, _ := again.Query(q); rep.Total.Calls != 3 {
		t.Errorf("after the keeper summed the day, a reader counts %d calls, want 3", rep.Total.Calls)
	}
	if _, err := OpenReadOnly(filepath.Join(dir, "missing"), Options{}); err != nil {
		t.Errorf("a missing ledger: %v, want an empty one", err)
	}
}
