package main

import (
	"slices"
	"time"
)

// percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// sorted; zero for no samples.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(float64(len(sorted))*p/100+0.999999999) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// latencies summarises one run's samples.
type latencies struct {
	N             int
	P50, P90, P99 time.Duration
	Max           time.Duration
}

func summarise(samples []time.Duration) latencies {
	s := slices.Clone(samples)
	slices.Sort(s)
	l := latencies{N: len(s), P50: percentile(s, 50), P90: percentile(s, 90), P99: percentile(s, 99)}
	if len(s) > 0 {
		l.Max = s[len(s)-1]
	}
	return l
}

// median returns the median of xs (the lower middle one for an even count,
// so it is always a value that was measured); zero for none.
func median[T int64 | float64 | time.Duration](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// spread returns the smallest and largest of xs, to show how noisy the runs
// behind a median were.
func spread[T int64 | float64 | time.Duration](xs []T) (T, T) {
	if len(xs) == 0 {
		return 0, 0
	}
	return slices.Min(xs), slices.Max(xs)
}
