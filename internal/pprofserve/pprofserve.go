// Package pprofserve serves net/http/pprof on $NANOBOT_PPROF_ADDR (a
// loopback address) from the moment it is imported, so bench/cmd/nanobot-bench can
// profile a gateway under load. Only files built with -tags nanobot_pprof
// import it: release builds never contain it.
package pprofserve

import (
	"net"
	"net/http"
	_ "net/http/pprof" // registers /debug/pprof on http.DefaultServeMux
	"os"
	"runtime"
)

func init() {
	addr := os.Getenv("NANOBOT_PPROF_ADDR")
	if addr == "" {
		return
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		_, _ = os.Stderr.WriteString("nanobot_pprof: " + err.Error() + "\n")
		return
	}
	runtime.SetBlockProfileRate(int(1e6)) // one sample per ms blocked
	runtime.SetMutexProfileFraction(100)
	go func() { _ = http.Serve(ln, nil) }() // lives as long as the process
}
