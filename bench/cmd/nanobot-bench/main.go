// Command nanobot-bench measures the real nanobot gateway. It builds the
// nanobot binary (stripped, as released), starts fake Telegram, Discord and
// OpenAI servers on loopback, runs `nanobot gateway` against them as a child
// process, drives it, reads its CPU and memory from /proc, and prints the
// medians of several runs as Markdown (docs/BENCHMARKS.md explains every
// figure). Linux only: it reads /proc.
//
//	cd bench   # the bench module, beside the product's
//	go run ./cmd/nanobot-bench                      # every scenario, 5 runs each
//	go run ./cmd/nanobot-bench -scenario load -chats 100 -runs 3
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "nanobot-bench:", err)
		os.Exit(1)
	}
}
