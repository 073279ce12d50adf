//go:build nanobot_pprof

package main

import (
	"net"
	"net/http"
	_ "net/http/pprof" // registers /debug/pprof on http.DefaultServeMux
	"os"
	"runtime"
)

// A binary built with -tags nanobot_pprof serves net/http/pprof on
// $NANOBOT_PPROF_ADDR (a loopback address), so cmd/nanobot-bench can profile
// the gateway under load. Release builds never contain this file.
func init() {
	addr := os.Getenv("NANOBOT_PPROF_ADDR")
	if addr == "" {
		return
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		os.Stderr.WriteString("nanobot_pprof: " + err.Error() + "\n")
		return
	}
	runtime.SetBlockProfileRate(int(1e6)) // one sample per ms blocked
	runtime.SetMutexProfileFraction(100)
	go func() { _ = http.Serve(ln, nil) }() // lives as long as the process
}
