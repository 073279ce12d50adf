// Command nanobot is a personal AI assistant daemon for chat apps (the channel
// table, internal/channels/kinds), the browser and the command line. See README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
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
	ints := &interrupts{}
	stop := onSignals(cancel, ints)
	err := newRootCmd(ints).ExecuteContext(ctx)
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
// 128+signal, as a shell reports a process killed by it. A SIGINT that a
// command took over (ints: the REPL, where Ctrl-C stops an answer) is
// handed to it instead and counts for neither. stop ends the handler
// goroutine.
func onSignals(cancel context.CancelFunc, ints *interrupts) (stop func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		cancelled := false
		for {
			select {
			case s := <-sigs:
				switch {
				case s == os.Interrupt && ints.forward():
				case !cancelled:
					cancelled = true
					cancel()
				default:
					fmt.Fprintf(os.Stderr, "nanobot: second signal (%s): exiting now, without finishing the shutdown\n", s)
					os.Exit(128 + signalNumber(s))
				}
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
		<-ended
	}
}

// interrupts hands Ctrl-C (SIGINT) to the command that took it over; with
// none, a SIGINT is a shutdown like SIGTERM. A nil *interrupts has no taker.
type interrupts struct {
	mu sync.Mutex
	to chan struct{}
}

// take routes SIGINT to the returned channel (one pending at most: a burst
// of presses while the taker is busy is one) until release.
func (i *interrupts) take() (ints <-chan struct{}, release func()) {
	ch := make(chan struct{}, 1)
	i.mu.Lock()
	i.to = ch
	i.mu.Unlock()
	return ch, func() {
		i.mu.Lock()
		if i.to == ch {
			i.to = nil
		}
		i.mu.Unlock()
	}
}

// forward hands a SIGINT to the taker and reports whether there was one.
func (i *interrupts) forward() bool {
	if i == nil {
		return false
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.to == nil {
		return false
	}
	select {
	case i.to <- struct{}{}:
	default:
	}
	return true
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
