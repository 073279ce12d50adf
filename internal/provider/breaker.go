package provider

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// BreakerPolicy configures the circuit breaker each route (provider and
// model) has. Zero fields take the defaults in brackets.
type BreakerPolicy struct {
	// Failures is how many calls in a row that failed on the route (after
	// their retries) open the circuit [3].
	Failures int
	// Cooldown is how long an open circuit skips the route before one probe
	// call may try it again [30s].
	Cooldown time.Duration
}

func (p BreakerPolicy) withDefaults() BreakerPolicy {
	if p.Failures <= 0 {
		p.Failures = 3
	}
	if p.Cooldown <= 0 {
		p.Cooldown = 30 * time.Second
	}
	return p
}

// ErrCircuitOpen means a route was skipped because it kept failing just
// before. The error that carries it also wraps the failure that opened the
// circuit. The caller should try again after the cool-down (or configure a
// fallback).
var ErrCircuitOpen = errors.New("circuit open")

// circuitError is returned for a route skipped by its breaker.
type circuitError struct {
	route string
	until time.Time
	last  error
}

func (e *circuitError) Error() string {
	return fmt.Sprintf("%s skipped until %s after repeated failures (last: %v)", e.route, e.until.Format(time.TimeOnly), e.last)
}

func (e *circuitError) Unwrap() []error { return []error{ErrCircuitOpen, e.last} }

// breaker is one route's circuit: closed (calls go through), open (calls
// are refused until the cool-down ends), then half-open (one probe call
// goes through; its success closes the circuit, its failure opens it again).
type breaker struct {
	policy BreakerPolicy

	mu        sync.Mutex
	failures  int       // failed calls in a row while closed
	openUntil time.Time // zero while closed
	probing   bool      // a half-open probe is in flight
	last      error     // the failure that opened the circuit
}

// allow reports whether a call may go to the route now; when it may not,
// err says why. probe is true for the one call let through after the
// cool-down; it must be followed by exactly one of success, fail or release.
func (b *breaker) allow(now time.Time, route string) (probe bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.openUntil.IsZero():
		return false, nil
	case now.Before(b.openUntil) || b.probing:
		return false, &circuitError{route: route, until: b.openUntil, last: b.last}
	}
	b.probing = true
	return true, nil
}

// success records a call that reached the provider and got an answer (or a
// refusal that proves the provider is up): the circuit closes.
func (b *breaker) success() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures, b.openUntil, b.probing, b.last = 0, time.Time{}, false, nil
}

// fail records a call that failed with a retryable error after its
// retries, and reports whether the circuit is now open.
func (b *breaker) fail(now time.Time, err error) (opened bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures++
	if b.probing || b.failures >= b.policy.Failures {
		b.openUntil, b.probing, b.last = now.Add(b.policy.Cooldown), false, err
		return true
	}
	return false
}

// release ends a call that proved nothing (it was cancelled), so the next
// call may probe.
func (b *breaker) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
}
