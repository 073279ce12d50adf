package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// reclaimFilePages asks the kernel to page out every file-backed mapping of
// process pid (its executable's text and read-only data), as memory pressure
// would. Pages the process goes on using fault straight back in from the page
// cache, so the RSS some seconds later is the idle working set rather than
// everything the start happened to touch. Anonymous memory is left alone.
// It needs CAP_SYS_NICE (process_madvise, Linux 5.10+).
func reclaimFilePages(pid int) error {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return fmt.Errorf("read maps of %d: %w", pid, err)
	}
	vecs, err := fileMappings(data)
	if err != nil {
		return err
	}
	if len(vecs) == 0 {
		return nil
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return fmt.Errorf("pidfd of %d: %w", pid, err)
	}
	defer func() { _ = unix.Close(fd) }()
	// process_madvise takes at most IOV_MAX (1024) ranges per call.
	for len(vecs) > 0 {
		n := min(len(vecs), 1024)
		_, _, errno := unix.Syscall6(unix.SYS_PROCESS_MADVISE, uintptr(fd), uintptr(unsafe.Pointer(&vecs[0])), uintptr(n), unix.MADV_PAGEOUT, 0, 0)
		if errno != 0 {
			return fmt.Errorf("process_madvise(MADV_PAGEOUT) on %d: %w", pid, errno)
		}
		vecs = vecs[n:]
	}
	return nil
}

// fileMappings returns the address ranges of the file-backed mappings in a
// /proc/<pid>/maps listing: those whose path is an absolute file name.
func fileMappings(maps []byte) ([]iovec, error) {
	var vecs []iovec
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || !strings.HasPrefix(f[5], "/") {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			return nil, fmt.Errorf("maps: bad range %q", f[0])
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			return nil, fmt.Errorf("maps: bad range %q", f[0])
		}
		vecs = append(vecs, iovec{base: uintptr(start), len: uintptr(end - start)})
	}
	return vecs, sc.Err()
}

// iovec is struct iovec: the addresses are the other process's, so they are
// kept as integers, never as Go pointers.
type iovec struct {
	base uintptr
	len  uintptr
}

// idleWorkingSet pages out the idle process's file-backed memory and samples
// its RSS every 100 ms for d, returning the sample with the largest RSS: the
// memory the idle daemon really goes on using, as opposed to what its start
// touched once (package initialisers, the kernel's fault-around of whole
// 64 KiB blocks of the binary).
func idleWorkingSet(ctx context.Context, pid int, d time.Duration) (memory, error) {
	if err := reclaimFilePages(pid); err != nil {
		return memory{}, err
	}
	var top memory
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	end := time.After(d)
	for {
		select {
		case <-ctx.Done():
			return memory{}, ctx.Err()
		case <-end:
			return top, nil
		case <-tick.C:
			m, err := readMemory(pid)
			if err != nil {
				return memory{}, err
			}
			if m.RSS > top.RSS {
				top = m
			}
		}
	}
}
