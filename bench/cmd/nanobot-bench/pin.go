package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// pinning places the gateway on one CPU and the bench (the fakes and the
// load generator) on another, so the two do not take turns on the same
// cores and the gateway's throughput is what one core gives it. The gateway
// sees one CPU, and so runs with GOMAXPROCS 1.
type pinning struct {
	gateway, bench int // CPU numbers
}

// pinBench moves every thread of this process to the bench's CPU; threads
// started later inherit it. It returns the mask to give the gateway.
func (p pinning) pinBench() error {
	var set unix.CPUSet
	set.Set(p.bench)
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return fmt.Errorf("pin: %w", err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil {
			return fmt.Errorf("pin bench thread %d to CPU %d: %w", tid, p.bench, err)
		}
	}
	runtime.GOMAXPROCS(1)
	return nil
}

// startPinned runs start on a thread pinned to the gateway's CPU for the
// moment: a child inherits the affinity of the thread that forks it, so
// the gateway and every thread it starts run there. The thread goes back
// to the bench's CPU afterwards.
func (p pinning) startPinned(start func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var gw, bench unix.CPUSet
	gw.Set(p.gateway)
	bench.Set(p.bench)
	if err := unix.SchedSetaffinity(0, &gw); err != nil {
		return fmt.Errorf("pin gateway to CPU %d: %w", p.gateway, err)
	}
	err := start()
	if rerr := unix.SchedSetaffinity(0, &bench); rerr != nil && err == nil {
		err = fmt.Errorf("pin back to CPU %d: %w", p.bench, rerr)
	}
	return err
}

// gatewayCPUs reads the CPUs pid may run on, to check the pinning took.
func gatewayCPUs(pid int) (int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &set); err != nil {
		return 0, err
	}
	return set.Count(), nil
}
