package daemon

import (
	"slices"
	"testing"

	"github.com/nanobot-go/nanobot/internal/config"
)

// The ports confined commands may connect to: the web's, less the daemon's
// own services (the gateway's listener, NATS), unless the user lists one.
func TestConnectPortsLeaveOutTheDaemonsOwn(t *testing.T) {
	for _, tc := range []struct {
		name   string
		listen string
		nats   string
		extra  []int
		want   []uint16
	}{
		{"default", "127.0.0.1:18790", "", nil, []uint16{80, 443}},
		{"extra ports", "127.0.0.1:18790", "", []int{22, 8080}, []uint16{80, 443, 22, 8080}},
		{"gateway on 443", "0.0.0.0:443", "", nil, []uint16{80}},
		{"gateway on 443, listed by the user", "0.0.0.0:443", "", []int{443}, []uint16{80, 443}},
		{"NATS on 443 and 80 (cluster)", "127.0.0.1:18790", "nats://127.0.0.1:443, tls://nats.example:80", nil, nil},
		{"NATS default port never in the list", "127.0.0.1:18790", "nats://127.0.0.1", []int{22}, []uint16{80, 443, 22}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := config.Defaults()
			cfg := &c
			cfg.Gateway.Listen, cfg.Bus.NATS.URL, cfg.Tools.Exec.ConnectPorts = tc.listen, tc.nats, tc.extra
			if tc.nats != "" {
				cfg.Bus.Backend = config.BusNATS
			}
			if got := connectPorts(cfg); !slices.Equal(got, tc.want) {
				t.Errorf("connectPorts = %v, want %v", got, tc.want)
			}
			for _, own := range daemonPorts(cfg) {
				if slices.Contains(connectPorts(cfg), uint16(own)) && !slices.Contains(tc.extra, own) {
					t.Errorf("the daemon's port %d is open to commands", own)
				}
			}
		})
	}
}
