//go:build !unix

package tools

import (
	"fmt"
	"os"
	"os/exec"
)

func processGroupsSupported() error { return errNoProcessGroups }

func setProcessGroup(*exec.Cmd) {}

func killProcessGroup(int) error { return errNoProcessGroups }

func askToStop(int) error { return errNoProcessGroups }

func exitStatus(ps *os.ProcessState) string { return fmt.Sprintf("exit code %d", ps.ExitCode()) }
