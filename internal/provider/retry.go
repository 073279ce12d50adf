package provider

import (
	"math/rand/v2"
	"time"
)

// RetryPolicy bounds retries on one route. Zero fields take the defaults in
// brackets.
type RetryPolicy struct {
	// BaseDelay is the first backoff ceiling; it doubles per retry [1s].
	BaseDelay time.Duration
	// MaxDelay caps one backoff ceiling [30s].
	MaxDelay time.Duration
	// MaxWait is the longest server-requested wait (Retry-After) honoured;
	// a longer one moves on to the next route at once [60s].
	MaxWait time.Duration
	// DefaultRetries applies to providers without an entry in
	// Options.MaxRetries [2].
	DefaultRetries int
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.BaseDelay <= 0 {
		p.BaseDelay = time.Second
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = 30 * time.Second
	}
	if p.MaxWait <= 0 {
		p.MaxWait = time.Minute
	}
	if p.DefaultRetries <= 0 {
		p.DefaultRetries = 2
	}
	return p
}

// backoff is the ceiling of the wait before retry number n (1-based):
// BaseDelay·2^(n-1), capped at MaxDelay. The wait itself is drawn uniformly
// below it ("full jitter"), so clients that failed together do not retry
// together.
func (p RetryPolicy) backoff(n int) time.Duration {
	d := p.BaseDelay
	for i := 1; i < n && d < p.MaxDelay; i++ {
		d *= 2
	}
	return min(d, p.MaxDelay)
}

// fullJitter draws a wait uniformly from [0, d].
func fullJitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d + 1)
}
