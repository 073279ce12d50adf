package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// onboard, run as README runs it (./nanobot in the checkout), counts files
// and directories apart and suggests the next commands as the user typed
// this one.
func TestOnboardCountsFilesAndSpeaksAsInvoked(t *testing.T) {
	e := &env{t: t, home: t.TempDir()}
	cmd := exec.Command("./"+filepath.Base(binary), "onboard")
	cmd.Dir = filepath.Dir(binary)
	cmd.Env = e.environ()
	b, err := cmd.CombinedOutput()
	out := string(b)
	if err != nil {
		t.Fatalf("onboard: %v\n%s", err, out)
	}
	var files, dirs int
	for _, l := range strings.Split(out, "\n") {
		if item, ok := strings.CutPrefix(l, "  + "); ok {
			if strings.HasSuffix(item, "/") {
				dirs++
			} else {
				files++
			}
		}
	}
	m := regexp.MustCompile(`\((\d+) files?, (\d+) director(?:y|ies) created\)`).FindStringSubmatch(out)
	if m == nil || m[1] != strconv.Itoa(files) || m[2] != strconv.Itoa(dirs) || dirs == 0 {
		t.Errorf("onboard lists %d files and %d directories but says %q:\n%s", files, dirs, m, out)
	}
	for _, want := range []string{"  ./nanobot agent -m \"hello\"\n", "  ./nanobot gateway\n", "then open http://127.0.0.1:18790/"} {
		if !strings.Contains(out, want) {
			t.Errorf("onboard does not say %q:\n%s", want, out)
		}
	}
}

func TestInvokedAs(t *testing.T) {
	onPath, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on PATH")
	}
	for arg0, want := range map[string]string{
		"nanobot":           "nanobot",
		"./nanobot":         "./nanobot",
		"/opt/nb/nanobot":   "/opt/nb/nanobot", // not the one PATH finds
		onPath:              "sh",
		"../bin/nanobot-go": "../bin/nanobot-go",
	} {
		if got := invokedAs(arg0); got != want {
			t.Errorf("invokedAs(%q) = %q, want %q", arg0, got, want)
		}
	}
}

// Where onboard says the page is: on the listen address when it is
// loopback; in a container (the image listens on 0.0.0.0), through the
// port published on the host, with what it takes to serve it there.
func TestPageLines(t *testing.T) {
	tests := []struct {
		name      string
		p         page
		container bool
		want      string
	}{
		{"default", page{listen: "127.0.0.1:18790", enabled: true}, false, "then open http://127.0.0.1:18790/ (the web page; `nanobot web token` prints its login token)"},
		{"localhost", page{listen: "localhost:9000", enabled: true}, false, "then open http://127.0.0.1:9000/"},
		{"container", page{listen: "0.0.0.0:18790", enabled: true}, true,
			"then open http://127.0.0.1:18790/ on the host (the port docker-compose.yml publishes there)|" +
				"  the page is served on 0.0.0.0:18790 only with NANOBOT_CHANNELS_WEB_ALLOW_REMOTE=true (channels.web.allow_remote)"},
		{"container, allowed", page{listen: "0.0.0.0:18790", enabled: true, allowRemote: true}, true,
			"then open http://127.0.0.1:18790/ on the host (the port docker-compose.yml publishes there)"},
		{"a LAN address", page{listen: "192.168.1.5:18790", enabled: true, allowRemote: true}, false, "then open http://<this host>:18790/ (the gateway listens on 192.168.1.5:18790)"},
		{"off", page{listen: "127.0.0.1:18790"}, false, "(the web page is off: channels.web.enabled is false)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := strings.Join(pageLines(tt.p, tt.container, "nanobot"), "|")
			if !strings.HasPrefix(got, tt.want) {
				t.Errorf("pageLines = %q, want %q", got, tt.want)
			}
		})
	}
}
