package web

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestNonPublic(t *testing.T) {
	tests := []struct {
		addr string
		want string // "" for public
	}{
		{"127.0.0.1", "a loopback address"},
		{"127.255.0.9", "a loopback address"},
		{"::1", "a loopback address"},
		{"::ffff:127.0.0.1", "a loopback address"},
		{"10.1.2.3", "a private address"},
		{"172.16.0.1", "a private address"},
		{"172.31.255.254", "a private address"},
		{"192.168.1.1", "a private address"},
		{"fc00::1", "a private address"},
		{"169.254.169.254", "a cloud metadata address"},
		{"fd00:ec2::254", "a cloud metadata address"},
		{"100.100.100.200", "a cloud metadata address"},
		{"169.254.10.1", "a link-local address"},
		{"fe80::1", "a link-local address"},
		{"100.64.0.1", "a carrier-grade NAT (shared) address"},
		{"100.127.255.254", "a carrier-grade NAT (shared) address"},
		{"0.0.0.0", "an unspecified address"},
		{"0.1.2.3", `a "this network" address`},
		{"::", "an unspecified address"},
		{"224.0.0.1", "a multicast address"},
		{"ff02::1", "a multicast address"},
		{"255.255.255.255", "a reserved address"},
		{"198.18.0.1", "a benchmarking address"},
		{"192.0.2.10", "a documentation address"},
		{"2001:db8::1", "a documentation address"},
		{"64:ff9b::7f00:1", "a loopback address (inside NAT64)"},
		{"64:ff9b::a9fe:a9fe", "a cloud metadata address (inside NAT64)"},
		{"2002:a00:1::", "a private address (inside 6to4)"},
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"172.32.0.1", ""},
		{"100.128.0.1", ""},
		{"2606:4700:4700::1111", ""},
		{"64:ff9b::808:808", ""},
		{"::ffff:8.8.8.8", ""},
	}
	for _, tc := range tests {
		if got := nonPublic(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("nonPublic(%s) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}

// The Control hook refuses non-public addresses right before connect,
// whatever resolved them, so no packet is sent.
func TestDialerControlRefusesBeforeConnecting(t *testing.T) {
	g := newGuard(&fakeResolver{}, time.Second)
	for _, addr := range []string{"127.0.0.1:9", "10.0.0.1:80", "[::1]:443", "169.254.169.254:80"} {
		_, err := g.dialer.DialContext(context.Background(), "tcp", addr)
		var blocked *BlockedError
		if !errors.As(err, &blocked) {
			t.Errorf("dial %s: %v, want a BlockedError", addr, err)
		}
	}
	if err := g.control("tcp", "8.8.8.8:53", nil); err != nil {
		t.Errorf("control refused a public address: %v", err)
	}
	if err := g.control("unix", "/run/socket", nil); err == nil || !strings.Contains(err.Error(), "not an address") {
		t.Errorf("control on a non-IP address: %v", err)
	}
}

func TestDialRefusesNamesResolvingToPrivateAddresses(t *testing.T) {
	r := &fakeResolver{answers: map[string][][]netip.Addr{
		"intranet.test": {addrs("10.0.0.5", "192.168.0.7")},
	}}
	g := newGuard(r, time.Second)
	_, err := g.DialContext(context.Background(), "tcp", "intranet.test:80")
	var blocked *BlockedError
	if !errors.As(err, &blocked) || blocked.Host != "intranet.test" {
		t.Fatalf("dial: %v, want a BlockedError for intranet.test", err)
	}
	if want := "intranet.test resolves to 10.0.0.5, a private address"; !strings.Contains(err.Error(), want) {
		t.Errorf("error = %q, want it to contain %q", err, want)
	}
	if _, err := g.DialContext(context.Background(), "tcp", "unknown.test:80"); err == nil || !strings.Contains(err.Error(), "resolve unknown.test") {
		t.Errorf("unknown name: %v", err)
	}
}
