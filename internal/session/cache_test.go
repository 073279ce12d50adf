package session

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"
)

// fakeLoaded is a cache entry whose weight a use sets and which records
// being dropped.
type fakeLoaded struct {
	key     string
	weight  int64
	dropped int
	dropErr error
	drops   *[]string // every drop's key, in order
}

func (f *fakeLoaded) Weight() int64 { return f.weight }

func (f *fakeLoaded) Drop() error {
	f.dropped++
	if f.drops != nil {
		*f.drops = append(*f.drops, f.key)
	}
	return f.dropErr
}

// TestCache runs uses of keys (key=weight, in order) through a cache and
// checks which entries it keeps, what they weigh and which it dropped.
func TestCache(t *testing.T) {
	for _, tc := range []struct {
		name        string
		size        int
		bytes       int64
		uses        []string // key=weight
		wantKept    []string
		wantDropped []string
	}{
		{"under both bounds", 3, 100, []string{"a=10", "b=10"}, []string{"a", "b"}, nil},
		{"count: least recently used goes", 2, 100, []string{"a=1", "b=1", "c=1"}, []string{"b", "c"}, []string{"a"}},
		{"a use makes it recent", 2, 100, []string{"a=1", "b=1", "a=1", "c=1"}, []string{"a", "c"}, []string{"b"}},
		{"bytes: oldest go until it fits", 10, 25, []string{"a=10", "b=10", "c=10"}, []string{"b", "c"}, []string{"a"}},
		{"one over the bytes is not kept, nor the older", 10, 25, []string{"a=10", "huge=30"}, nil, []string{"a", "huge"}},
		{"a use records the new weight", 10, 25, []string{"a=20", "a=5", "b=10"}, []string{"a", "b"}, nil},
		{"an evicted key comes back fresh", 1, 100, []string{"a=1", "b=1", "a=1"}, []string{"a"}, []string{"a", "b"}},
		{"size 0 keeps nothing idle", 0, 0, []string{"a=0", "b=5"}, nil, []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var dropped []string
			c := NewCache(tc.size, tc.bytes, func(key string) *fakeLoaded {
				return &fakeLoaded{key: key, drops: &dropped}
			}, zaptest.NewLogger(t))
			for _, u := range tc.uses {
				key, w, _ := strings.Cut(u, "=")
				weight, err := strconv.ParseInt(w, 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				if err := c.Use(key, func(f *fakeLoaded) error { f.weight = weight; return nil }); err != nil {
					t.Fatal(err)
				}
			}
			var kept []string
			var sum int64
			for key, e := range c.entries {
				kept = append(kept, key)
				sum += e.weight
			}
			slices.Sort(kept)
			if !slices.Equal(kept, tc.wantKept) || !slices.Equal(dropped, tc.wantDropped) {
				t.Errorf("kept %v, dropped %v; want %v, %v", kept, dropped, tc.wantKept, tc.wantDropped)
			}
			if c.Len() != len(kept) || c.Weight() != sum {
				t.Errorf("Len, Weight = %d, %d; entries %d weighing %d", c.Len(), c.Weight(), len(kept), sum)
			}
		})
	}
}

// TestCacheInUseNotEvicted: an entry in use stays past the bounds and is
// dropped when its use ends; at most one entry per key exists meanwhile.
func TestCacheInUseNotEvicted(t *testing.T) {
	var dropped []string
	c := NewCache(0, 0, func(key string) *fakeLoaded {
		return &fakeLoaded{key: key, drops: &dropped}
	}, zaptest.NewLogger(t))
	err := c.Use("a", func(a *fakeLoaded) error {
		a.weight = 7
		if err := c.Use("b", func(*fakeLoaded) error { return nil }); err != nil {
			return err
		}
		if c.Len() != 1 || !slices.Equal(dropped, []string{"b"}) {
			t.Errorf("while a is in use: %d entries, dropped %v; want a alone, b dropped", c.Len(), dropped)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Len() != 0 || c.Weight() != 0 || !slices.Equal(dropped, []string{"b", "a"}) {
		t.Errorf("after its use: %d entries weighing %d, dropped %v; want none, b and a dropped", c.Len(), c.Weight(), dropped)
	}
}

// TestCacheClose: Close drops every entry, joins what dropping returned
// and makes later uses fail with ErrClosed; fn's own error passes as is.
func TestCacheClose(t *testing.T) {
	boom := errors.New("boom")
	c := NewCache(10, 100, func(key string) *fakeLoaded {
		if key == "bad" {
			return &fakeLoaded{dropErr: boom}
		}
		return &fakeLoaded{}
	}, zaptest.NewLogger(t))
	mine := errors.New("mine")
	if err := c.Use("ok", func(*fakeLoaded) error { return mine }); !errors.Is(err, mine) {
		t.Errorf("Use returned %v, want fn's error as is", err)
	}
	var bad *fakeLoaded
	if err := c.Use("bad", func(f *fakeLoaded) error { bad = f; return nil }); err != nil {
		t.Fatal(err)
	}
	err := c.Close()
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "session bad: close") {
		t.Errorf("Close = %v, want the bad entry's drop error", err)
	}
	if bad.dropped != 1 || c.Len() != 0 {
		t.Errorf("after Close: bad dropped %d times, %d entries left", bad.dropped, c.Len())
	}
	if err := c.Use("ok", func(*fakeLoaded) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("Use after Close = %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}
