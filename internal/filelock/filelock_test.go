package filelock

import (
	"errors"
	"slices"
	"sync"
	"testing"
)

// recorder is a sync.Locker that logs what happens to it.
type recorder struct {
	mu  sync.Mutex
	log *[]string
}

func (r *recorder) Lock()   { r.mu.Lock(); *r.log = append(*r.log, "mu locked") }
func (r *recorder) Unlock() { *r.log = append(*r.log, "mu unlocked"); r.mu.Unlock() }

func TestWithMutex(t *testing.T) {
	refused := errors.New("lock refused")
	cases := []struct {
		name       string
		acquireErr error
		want       []string
	}{
		{name: "both taken, the file's released first", want: []string{
			"mu locked", "file locked", "file unlocked", "mu unlocked"}},
		{name: "the file refused, mu released", acquireErr: refused, want: []string{
			"mu locked", "mu unlocked"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var log []string
			mu := &recorder{log: &log}
			release, err := WithMutex(mu, func() (func(), error) {
				if tc.acquireErr != nil {
					return nil, tc.acquireErr
				}
				log = append(log, "file locked")
				return func() { log = append(log, "file unlocked") }, nil
			})
			if !errors.Is(err, tc.acquireErr) {
				t.Fatalf("err = %v, want %v", err, tc.acquireErr)
			}
			if err == nil {
				release()
			}
			if !slices.Equal(log, tc.want) {
				t.Errorf("log = %q, want %q", log, tc.want)
			}
			if !mu.mu.TryLock() {
				t.Error("mu is still held")
			}
		})
	}
}
