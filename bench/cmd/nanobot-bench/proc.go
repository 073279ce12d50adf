package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// which is 100 on every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// memory is a process's resident memory from /proc/<pid>/status, in bytes.
type memory struct {
	RSS     int64 // VmRSS: what the process holds in RAM now
	Peak    int64 // VmHWM: the largest VmRSS so far
	Anon    int64 // RssAnon: heap, stacks, the Go runtime's own memory
	File    int64 // RssFile: mapped pages of the binary and files
	Threads int
}

func readMemory(pid int) (memory, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, fmt.Errorf("read memory of %d: %w", pid, err)
	}
	return parseStatus(data)
}

// parseStatus reads the fields of memory from a /proc/<pid>/status file.
func parseStatus(data []byte) (memory, error) {
	var m memory
	fields := map[string]*int64{"VmRSS": &m.RSS, "VmHWM": &m.Peak, "RssAnon": &m.Anon, "RssFile": &m.File}
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(value)
		if name == "Threads" && len(f) == 1 {
			m.Threads, _ = strconv.Atoi(f[0])
			continue
		}
		dst, want := fields[name]
		if !want {
			continue
		}
		if len(f) != 2 || f[1] != "kB" {
			return memory{}, fmt.Errorf("status field %s: unexpected value %q", name, value)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return memory{}, fmt.Errorf("status field %s: %w", name, err)
		}
		*dst = kb << 10
		found++
	}
	if found != len(fields) {
		return memory{}, fmt.Errorf("status: found %d of the %d memory fields", found, len(fields))
	}
	return m, nil
}

// readCPU returns the CPU time (user + system, all threads) the process has
// used so far.
func readCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read cpu of %d: %w", pid, err)
	}
	return parseStat(data)
}

// parseStat reads utime and stime (fields 14 and 15) from /proc/<pid>/stat.
// The command name (field 2) may hold spaces and parentheses, so fields are
// counted after its closing parenthesis.
func parseStat(data []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat: no command name")
	}
	f := strings.Fields(string(data[i+1:]))
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 13 {
		return 0, fmt.Errorf("stat: %d fields after the name, want at least 13", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("stat: utime/stime: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}
