package llm

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/url"
	"syscall"
)

// Unreachable reports whether err is a failure to reach a server at all —
// a name that does not resolve, a refused, reset or timed-out connection,
// no route, a TLS handshake that failed — and says so in a short form that
// is safe to show a user: "cannot reach api.example.com: connection
// refused". It names the host (with the port when the URL gave one), never
// the URL's path, query or user info, which can carry keys. Failures after
// the server answered (an HTTP status, a stream cut short) are not
// "unreachable": it returns false for them.
func Unreachable(err error) (string, bool) {
	if err == nil || errors.Is(err, ErrTruncated) {
		return "", false
	}
	reason := unreachableReason(err)
	if reason == "" {
		return "", false
	}
	if host := unreachableHost(err); host != "" {
		return "cannot reach " + host + ": " + reason, true
	}
	return "cannot reach the server: " + reason, true
}

// unreachableReason names the network failure in err, or "" when err is
// not one.
func unreachableReason(err error) string {
	var dns *net.DNSError
	var unknownCA x509.UnknownAuthorityError
	var badHost x509.HostnameError
	var badCert x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	var op *net.OpError
	switch {
	case errors.As(err, &dns) && dns.IsNotFound:
		return "no such host"
	case errors.As(err, &dns) && dns.IsTimeout:
		return "DNS lookup timed out"
	case errors.As(err, &dns):
		return "DNS lookup failed"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.EHOSTUNREACH):
		return "no route to host"
	case errors.Is(err, syscall.ENETUNREACH):
		return "network unreachable"
	case errors.As(err, &unknownCA), errors.As(err, &badHost), errors.As(err, &badCert), errors.As(err, &verify):
		return "its TLS certificate is not trusted"
	case errors.As(err, &op) && op.Op == "dial" && op.Timeout():
		return "connection timed out"
	case errors.As(err, &op) && op.Op == "dial":
		return "cannot connect"
	case errors.As(err, &op) && op.Op == "proxyconnect":
		return "the proxy cannot be reached"
	}
	return ""
}

// unreachableHost is the host (and port, when given) err was about: from
// the request URL, else the DNS name or the dialled address.
func unreachableHost(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil && u.Host != "" {
			return u.Host
		}
	}
	var dns *net.DNSError
	if errors.As(err, &dns) && dns.Name != "" {
		return dns.Name
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Addr != nil {
		return op.Addr.String()
	}
	return ""
}
