// Command nanobot is a personal AI assistant daemon for Telegram, Discord and
// the command line. See README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/nanobot-go/nanobot/internal/sandbox"
)

func main() {
	// `nanobot __sandbox-exec POLICY COMMAND...` is the hidden launcher the
	// exec tool starts every command through (internal/sandbox): it
	// confines itself and execs the command, before cobra is even built.
	sandbox.MaybeLaunch()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := onSignals(cancel)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		var exit exitError
		if errors.As(err, &exit) {
			os.Exit(exit.code)
		}
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// onSignals cancels the commands' context on the first SIGINT or SIGTERM,
// so they shut down in order (the gateway finishes its turns within
// gateway.shutdown_grace), and exits at once on the second: an operator who
// presses Ctrl-C twice is not kept waiting. The exit status is then
// 128+signal, as a shell reports a process killed by it. stop ends the
// handler goroutine.
func onSignals(cancel context.CancelFunc) (stop func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		select {
		case <-sigs:
			cancel()
		case <-done:
			return
		}
		select {
		case s := <-sigs:
			fmt.Fprintf(os.Stderr, "nanobot: second signal (%s): exiting now, without finishing the shutdown\n", s)
			os.Exit(128 + signalNumber(s))
		case <-done:
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
		<-ended
	}
}

func signalNumber(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return int(n)
	}
	return 1
}

// exitError ends the program with a code after its message was printed.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }
