//go:build nanobot_pprof

package main

// A binary built with -tags nanobot_pprof serves net/http/pprof on
// $NANOBOT_PPROF_ADDR, so bench/cmd/nanobot-bench can profile it under load.
// Release builds never contain this file.
import _ "github.com/nanobot-go/nanobot/internal/pprofserve"
