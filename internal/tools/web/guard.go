package web

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"
)

// Resolver resolves host names to addresses; *net.Resolver implements it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// BlockedError reports a destination outside the public internet. It
// reaches the model as the reason a fetch was refused.
type BlockedError struct {
	Host string     // as written in the URL ("" when only the address is known)
	Addr netip.Addr // the address that was refused
	Why  string     // "a loopback address", "a private address", ...
}

func (e *BlockedError) Error() string {
	if e.Host == "" || e.Host == e.Addr.String() {
		return fmt.Sprintf("%s is %s", e.Addr, e.Why)
	}
	return fmt.Sprintf("%s resolves to %s, %s", e.Host, e.Addr, e.Why)
}

// special lists non-public ranges that netip's predicates do not cover.
var special = []struct {
	prefix netip.Prefix
	why    string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), `a "this network" address`},
	{netip.MustParsePrefix("100.64.0.0/10"), "a carrier-grade NAT (shared) address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol address"},
	{netip.MustParsePrefix("192.0.2.0/24"), "a documentation address"},
	{netip.MustParsePrefix("198.51.100.0/24"), "a documentation address"},
	{netip.MustParsePrefix("203.0.113.0/24"), "a documentation address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
	{netip.MustParsePrefix("100::/64"), "a discard address"},
	{netip.MustParsePrefix("2001:db8::/32"), "a documentation address"},
	{netip.MustParsePrefix("fec0::/10"), "a site-local address"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a local NAT64 address"},
}

// metadata are the cloud instance-metadata endpoints, named as such because
// they are what an attacker usually wants from a fetch tool.
var metadata = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"), // AWS, GCP, Azure, DigitalOcean, ...
	netip.MustParseAddr("fd00:ec2::254"),   // AWS over IPv6
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud
}

var (
	nat64  = netip.MustParsePrefix("64:ff9b::/96") // embeds an IPv4 address in its last 32 bits
	sixTo4 = netip.MustParsePrefix("2002::/16")    // embeds an IPv4 address in bits 16-47
)

// nonPublic says why a is not a public internet address, or "" if it is.
func nonPublic(a netip.Addr) string {
	a = a.Unmap()
	for _, m := range metadata {
		if a == m {
			return "a cloud metadata address"
		}
	}
	switch {
	case !a.IsValid():
		return "not an address"
	case a.IsUnspecified():
		return "an unspecified address"
	case a.IsLoopback():
		return "a loopback address"
	case a.IsPrivate():
		return "a private address"
	case a.IsLinkLocalUnicast():
		return "a link-local address"
	case a.IsMulticast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast():
		return "a multicast address"
	}
	for _, s := range special {
		if s.prefix.Contains(a) {
			return s.why
		}
	}
	// IPv6 forms that carry an IPv4 address are judged by that address.
	b := a.As16()
	switch {
	case nat64.Contains(a):
		if why := nonPublic(netip.AddrFrom4([4]byte(b[12:16]))); why != "" {
			return why + " (inside NAT64)"
		}
	case sixTo4.Contains(a):
		if why := nonPublic(netip.AddrFrom4([4]byte(b[2:6]))); why != "" {
			return why + " (inside 6to4)"
		}
	}
	return ""
}

// guard is web_fetch's dialer: it resolves names itself and connects only
// to public addresses, checking each address once more in the socket's
// Control hook, right before connect.
type guard struct {
	resolver Resolver
	dialer   net.Dialer
	// exempt lets tests reach their own loopback server; nil in production.
	exempt func(netip.AddrPort) bool
}

func newGuard(resolver Resolver, timeout time.Duration) *guard {
	g := &guard{resolver: resolver}
	g.dialer = net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second, Control: g.control}
	return g
}

// check refuses ap unless it is public (or exempt).
func (g *guard) check(host string, ap netip.AddrPort) error {
	if g.exempt != nil && g.exempt(ap) {
		return nil
	}
	if why := nonPublic(ap.Addr()); why != "" {
		return &BlockedError{Host: host, Addr: ap.Addr().Unmap(), Why: why}
	}
	return nil
}

// control runs on every socket before it connects: the last word on where
// the connection goes, whatever resolved the name.
func (g *guard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("connect to %q refused: not an address", address)
	}
	return g.check("", ap)
}

// DialContext resolves addr's host and connects to its first public
// address that answers. A name with only non-public addresses is refused
// before any connection is attempted.
func (g *guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("dial %s: bad port: %w", addr, err)
	}
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{ip}
	} else if addrs, err = g.resolver.LookupNetIP(ctx, "ip", host); err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	var errs []error
	var public []netip.AddrPort
	for _, a := range addrs {
		ap := netip.AddrPortFrom(a.Unmap(), uint16(port))
		if err := g.check(host, ap); err != nil {
			errs = append(errs, err)
			continue
		}
		public = append(public, ap)
	}
	for i, ap := range public {
		conn, err := g.dialOne(ctx, network, ap, len(public)-i)
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("resolve %s: no addresses", host)
	}
	return nil, errors.Join(errs...)
}

// dialOne connects to ap. With more addresses left to try, it gets its share
// of the connect timeout, as net.Dialer does, so one dead address (an IPv6
// route that goes nowhere) does not use up the whole timeout.
func (g *guard) dialOne(ctx context.Context, network string, ap netip.AddrPort, left int) (net.Conn, error) {
	if left > 1 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.dialer.Timeout/time.Duration(left))
		defer cancel()
	}
	return g.dialer.DialContext(ctx, network, ap.String())
}
