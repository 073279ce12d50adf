// Command nanobot-floor is a benchmark reference, not a product: the least
// a gateway has to do for a Telegram turn, written with the libraries the
// product owner fixed, so that nanobot-bench can measure what the physical
// work of a turn costs on this machine and set nanobot's figures beside it
// (docs/BENCHMARKS.md, "The floor").
//
// It reads nanobot's config (`--config FILE gateway`, as the bench starts
// nanobot) and does, per turn, only what a turn cannot go without:
//
//   - getUpdates (a long poll, net/http, as nanobot does), each batch
//     appended to a journal and fsync'd before the next call confirms it;
//   - one streamed Chat Completions call through go-openai, whose request
//     holds what nanobot's holds: the same system prompt (built once, by
//     nanobot's own PromptBuilder), the same built-in tool schemas, the
//     chat's recent messages and the new one. The parts that repeat are
//     encoded once and spliced in, as nanobot's adapter does;
//   - the user's message and the answer appended to the chat's JSONL file
//     and fsync'd;
//   - sendMessage through go-telegram/bot.
//
// Everything else nanobot does is absent: no bus, no agent loop or tool
// loop, no session index or read-back, no prompt re-checks, no history
// budget, no memory consolidation, no typing action, no Markdown, no
// logging, metrics, limits or error handling beyond giving up on the turn.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "nanobot-floor:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("nanobot-floor", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "nanobot config file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	f, err := newFloor(*cfgPath)
	if err != nil {
		return err
	}
	defer f.close()
	return f.serve(ctx)
}
