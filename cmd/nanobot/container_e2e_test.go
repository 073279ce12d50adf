package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nanobot-go/nanobot/internal/testkit/fakes/fakellm"
	"github.com/nanobot-go/nanobot/internal/testkit/fakes/openaifake"
)

// The container image sets NANOBOT_CONFIG=/data/config.yaml: onboard must
// then put the workspace beside it and every command must use it.
func TestConfigPathFromEnvironment(t *testing.T) {
	e := &env{t: t, home: t.TempDir(), script: &fakellm.Script{}}
	e.llm = openaifake.New(t, e.script)
	data := filepath.Join(e.home, "data")
	cmd := exec.Command(binary, "onboard")
	cmd.Env = e.environ("NANOBOT_CONFIG=" + filepath.Join(data, "config.yaml"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("onboard: %v\n%s", err, out)
	}
	for _, p := range []string{"config.yaml", "workspace/AGENTS.md"} {
		if _, err := os.Stat(filepath.Join(data, p)); err != nil {
			t.Errorf("onboard with NANOBOT_CONFIG did not write %s: %v", p, err)
		}
	}
	e.script.Push(fakellm.Reply{Text: "from the data dir"})
	cmd = exec.Command(binary, "agent", "-m", "hi")
	cmd.Env = e.environ("NANOBOT_CONFIG=" + filepath.Join(data, "config.yaml"))
	if out, err := cmd.Output(); err != nil || strings.TrimSpace(string(out)) != "from the data dir" {
		t.Errorf("agent with NANOBOT_CONFIG: %v %q", err, out)
	}
	if _, err := os.Stat(filepath.Join(data, "sessions", "cli_local.jsonl")); err != nil {
		t.Errorf("the session was not written in the data dir's sessions/: %v", err)
	}
}

// containerEnv is the environment the image and docker-compose.yml give
// the gateway: the Dockerfile's ENV and the compose file's environment
// entries, each NANOBOT_* one (the listen port made 0, free by
// construction), read from the files themselves so a change there is
// tested here.
func containerEnv(t *testing.T, compose bool) []string {
	t.Helper()
	var env []string
	add := func(name, value string) {
		if strings.HasPrefix(name, "NANOBOT_") && name != "NANOBOT_CONFIG" {
			if name == "NANOBOT_GATEWAY_LISTEN" {
				value = strings.Replace(value, ":18790", ":0", 1)
			}
			env = append(env, name+"="+value)
		}
	}
	for _, m := range regexp.MustCompile(`(NANOBOT_\w+)=(\S+)`).FindAllStringSubmatch(string(mustRead(t, "../../Dockerfile")), -1) {
		add(m[1], m[2])
	}
	if compose {
		for _, m := range regexp.MustCompile(`(?m)^\s+(NANOBOT_\w+): "?([^"\s]+)"?$`).FindAllStringSubmatch(string(mustRead(t, "../../docker-compose.yml")), -1) {
			add(m[1], m[2])
		}
	}
	return env
}

// In the container the gateway listens on 0.0.0.0: with docker-compose.yml's
// environment the web page is served (reached through the port the compose
// file publishes on the host's loopback); with the image's alone it is off,
// as README says.
func TestWebPageInTheContainersEnvironment(t *testing.T) {
	for _, tt := range []struct {
		name    string
		compose bool
		want    int
	}{{"docker-compose.yml", true, http.StatusOK}, {"the image alone", false, http.StatusNotFound}} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			env := containerEnv(t, tt.compose)
			if !slices.Contains(env, "NANOBOT_GATEWAY_LISTEN=0.0.0.0:0") {
				t.Fatalf("the Dockerfile no longer listens on 0.0.0.0:18790: %q", env)
			}
			g := e.startGateway(append(env, "NANOBOT_GATEWAY_HEARTBEAT_ENABLED=false"))
			_, port, err := net.SplitHostPort(strings.TrimPrefix(g.base, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.Get("http://127.0.0.1:" + port + "/")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want || (tt.want == http.StatusOK && !strings.Contains(string(body), `id="login-token"`)) {
				t.Errorf("GET / with %q: %d, want %d\n%.300s", env, resp.StatusCode, tt.want, body)
			}
		})
	}
}
