// Package filelocktest runs a test's helper in a second process, so that
// tests of cross-process locking race real processes, not goroutines: the
// test binary is started again with -test.run naming a helper test, which
// finds itself in the child with IsChild and talks to the parent one line at
// a time over stdin and stdout. Only tests import it.
package filelocktest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// childEnv marks the child process; its value is the helper test's name.
const childEnv = "FILELOCKTEST_CHILD"

// IsChild reports whether this process was started by Start to run helper.
// A helper test returns at once when it is false.
func IsChild(helper string) bool { return os.Getenv(childEnv) == helper }

// Child is a helper process seen from the test that started it.
type Child struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *syncBuffer
	done   bool
}

// Start runs the test named helper (a func TestXxx that checks IsChild) in a
// new process with env added to this one's. The process is killed at the
// end of the test if it is still running.
func Start(t *testing.T, helper string, env ...string) *Child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+helper+"$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), childEnv+"="+helper), env...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatalf("start %s: %v", helper, err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("start %s: %v", helper, err)
	}
	c := &Child{cmd: cmd, in: in, out: bufio.NewReader(out), stderr: &syncBuffer{}}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", helper, err)
	}
	t.Cleanup(func() {
		if !c.done {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return c
}

// Expect reads the child's next line and fails the test unless it is want.
func (c *Child) Expect(t *testing.T, want string) {
	t.Helper()
	if got := c.Read(t); got != want {
		// The child failed (its report follows on stdout) or lost its
		// way; with stdin closed it runs to its end.
		_ = c.in.Close()
		rest, _ := io.ReadAll(c.out)
		t.Fatalf("child said %q, want %q; then:\n%s\nits stderr:\n%s", got, want, rest, c.stderr)
	}
}

// Read returns the child's next line, failing the test if there is none.
func (c *Child) Read(t *testing.T) string {
	t.Helper()
	line, err := c.out.ReadString('\n')
	if err != nil {
		t.Fatalf("child's output ended (%v) after %q; its stderr:\n%s", err, line, c.stderr)
	}
	return strings.TrimSuffix(line, "\n")
}

// Send writes line to the child's stdin.
func (c *Child) Send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		t.Fatalf("tell the child %q: %v", line, err)
	}
}

// Wait closes the child's stdin, waits for it to exit and returns an error
// with its output unless its helper passed. Call it once, from any goroutine.
func (c *Child) Wait() error {
	_ = c.in.Close()
	rest, _ := io.ReadAll(c.out)
	err := c.cmd.Wait()
	c.done = true
	if err != nil {
		return fmt.Errorf("child failed (%v); its output:\n%s\nits stderr:\n%s", err, rest, c.stderr)
	}
	return nil
}

// Parent is the test that started this child, seen from the child.
type Parent struct {
	in *bufio.Reader
}

// ParentOf returns the channel to the parent; call it in the child only.
func ParentOf() *Parent { return &Parent{in: bufio.NewReader(os.Stdin)} }

// Say writes line to the parent.
func (p *Parent) Say(line string) { fmt.Println(line) }

// Hear waits for the parent's next line; "" when the parent closed stdin.
func (p *Parent) Hear() string {
	line, _ := p.in.ReadString('\n')
	return strings.TrimSuffix(line, "\n")
}

// syncBuffer is a bytes.Buffer safe for the exec copier and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
