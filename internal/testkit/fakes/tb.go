package fakes

import (
	"fmt"
	"log"
	"slices"
	"sync"
)

// TB is the part of testing.TB the fake servers use. *testing.T and
// *testing.B satisfy it; a program that is not a test (bench/cmd/nanobot-bench)
// passes a *Standalone.
type TB interface {
	Helper()
	Cleanup(func())
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Standalone lets a program that is not a test run the fakes: Cleanup
// functions run, last first, when Close is called; Logf and Errorf go to
// Log (nothing when nil); Fatalf, which a fake calls only when its driver
// misuses it (an unknown channel id), panics with the message, since there
// is no test to fail.
type Standalone struct {
	// Log receives Logf and Errorf lines; nil discards them.
	Log *log.Logger

	mu       sync.Mutex
	cleanups []func()
	errors   int
}

var _ TB = (*Standalone)(nil)

// Helper does nothing: there is no test output to attribute lines in.
func (s *Standalone) Helper() {}

// Cleanup registers f to run on Close.
func (s *Standalone) Cleanup(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, f)
}

// Logf logs a line.
func (s *Standalone) Logf(format string, args ...any) {
	if s.Log != nil {
		s.Log.Printf(format, args...)
	}
}

// Errorf logs a line and counts it (see Errors).
func (s *Standalone) Errorf(format string, args ...any) {
	s.mu.Lock()
	s.errors++
	s.mu.Unlock()
	s.Logf("error: "+format, args...)
}

// Fatalf panics: the driver used a fake wrongly.
func (s *Standalone) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

// Errors is how many times Errorf was called: a fake that could not do what
// it was asked (a reply it could not encode).
func (s *Standalone) Errors() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.errors
}

// Close runs the registered cleanups, last registered first, once each.
func (s *Standalone) Close() {
	s.mu.Lock()
	fs := slices.Clone(s.cleanups)
	s.cleanups = nil
	s.mu.Unlock()
	for _, f := range slices.Backward(fs) {
		f()
	}
}
