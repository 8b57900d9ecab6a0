package fetcher

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
)

// The SSRF guard. A feed URL is user input, and so is every redirect a feed
// server answers with: without a guard, "subscribing" to
// http://169.254.169.254/ or http://localhost:6060/ would make slogfeed
// fetch from the machine's own services or its private network. The guard
// runs in net.Dialer.Control, that is after DNS resolution and on the very
// IP address being connected to, so a hostname that resolves to a private
// address (DNS rebinding included) is refused as well as a literal one.

// blockedPrefixes are the address ranges the guard refuses unless they are
// allow-listed: everything that is not an ordinary public unicast address.
var blockedPrefixes = func() []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8",       // "this network", unspecified
		"10.0.0.0/8",      // RFC 1918
		"100.64.0.0/10",   // carrier-grade NAT (RFC 6598)
		"127.0.0.0/8",     // loopback
		"169.254.0.0/16",  // link-local, cloud metadata services
		"172.16.0.0/12",   // RFC 1918
		"192.0.0.0/24",    // IETF protocol assignments
		"192.0.2.0/24",    // TEST-NET-1
		"192.168.0.0/16",  // RFC 1918
		"198.18.0.0/15",   // benchmarking
		"198.51.100.0/24", // TEST-NET-2
		"203.0.113.0/24",  // TEST-NET-3
		"224.0.0.0/4",     // multicast
		"240.0.0.0/4",     // reserved, and 255.255.255.255 broadcast
		"::/128",          // unspecified
		"::1/128",         // loopback
		"::/96",           // IPv4-compatible (deprecated)
		"100::/64",        // discard-only
		"2001:db8::/32",   // documentation
		"fc00::/7",        // unique local
		"fe80::/10",       // link-local
		"fec0::/10",       // site-local (deprecated)
		"ff00::/8",        // multicast
		"64:ff9b:1::/48",  // local-use IPv4/IPv6 translation
		"2001::/32",       // Teredo: embeds an address that may be private
		"2001:10::/28",    // ORCHID
		"2001:20::/28",    // ORCHIDv2
	} {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}()

// broadcast is the IPv4 limited broadcast address.
var broadcast = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// Prefixes whose addresses embed an IPv4 address that is checked in turn.
var (
	nat64Prefix = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour   = netip.MustParsePrefix("2002::/16")
)

// guard decides which addresses the fetcher may connect to.
type guard struct {
	allow     []netip.Prefix
	endpoints []netip.AddrPort
	allowAll  bool
}

// check returns nil when ip may be dialled on port, else an error
// wrapping ErrBlocked.
func (g *guard) check(ip netip.Addr, port uint16) error {
	if g.allowAll {
		return nil
	}
	ip = ip.WithZone("")
	if g.allowed(ip) || g.allowedEndpoint(ip, port) {
		return nil
	}
	if reason := blockReason(ip); reason != "" {
		return fmt.Errorf("%w: %s is %s %s address (add it to the allow-list to fetch from it)", ErrBlocked, ip, article(reason), reason)
	}
	return nil
}

// allowed reports whether ip, in any of its forms, is on the allow-list.
func (g *guard) allowed(ip netip.Addr) bool {
	for _, form := range []netip.Addr{ip, ip.Unmap()} {
		for _, p := range g.allow {
			if p.Contains(form) {
				return true
			}
		}
	}
	return false
}

// allowedEndpoint reports whether ip, in any of its forms, with port is
// an allowed endpoint.
func (g *guard) allowedEndpoint(ip netip.Addr, port uint16) bool {
	for _, form := range []netip.Addr{ip, ip.Unmap()} {
		for _, e := range g.endpoints {
			if e.Addr() == form && e.Port() == port {
				return true
			}
		}
	}
	return false
}

// blockReason says what kind of non-public address ip is ("loopback",
// "private", …), or "" when it is a public address.
func blockReason(ip netip.Addr) string {
	if !ip.IsValid() {
		return "invalid"
	}
	if ip.Is4In6() {
		if r := blockReason(ip.Unmap()); r != "" {
			return "IPv4-mapped " + r
		}
		return ""
	}
	if v4, ok := embeddedIPv4(ip); ok {
		if r := blockReason(v4); r != "" {
			return "IPv6-translated " + r
		}
		return ""
	}
	switch {
	case ip.IsLoopback():
		return "loopback"
	case ip.IsPrivate():
		return "private"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "link-local"
	case ip.IsUnspecified():
		return "unspecified"
	case ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		return "multicast"
	case ip == broadcast:
		return "broadcast"
	}
	for _, p := range blockedPrefixes {
		if p.Contains(ip) {
			return "reserved (" + p.String() + ")"
		}
	}
	return ""
}

// article is "a" or "an" before word.
func article(word string) string {
	if word != "" && strings.ContainsRune("aeiouAEIOU", rune(word[0])) {
		return "an"
	}
	return "a"
}

// embeddedIPv4 returns the IPv4 address carried by a NAT64 or 6to4 address.
func embeddedIPv4(ip netip.Addr) (netip.Addr, bool) {
	b := ip.As16()
	switch {
	case nat64Prefix.Contains(ip):
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
	case sixToFour.Contains(ip):
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), true
	}
	return netip.Addr{}, false
}

// control is the net.Dialer.Control hook: it runs for every connection
// attempt, after name resolution, with the numeric address being dialled.
func (g *guard) control(network, address string, _ syscall.RawConn) error {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return fmt.Errorf("%w: network %q", ErrBlocked, network)
	}
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("%w: address %q: %v", ErrBlocked, address, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("%w: address %q is not numeric", ErrBlocked, address)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return fmt.Errorf("%w: address %q: bad port", ErrBlocked, address)
	}
	return g.check(ip, uint16(port))
}

// literalHost reads a URL's host name as an IP address when it is one in
// any form a resolver or a browser accepts, so that it is checked, and
// dialled, without a DNS query: the usual forms ("127.0.0.1", "::1") and
// the numeric IPv4 forms of inet_aton and the WHATWG URL standard: one to
// four dot-separated parts, each decimal, octal (a leading 0) or
// hexadecimal (0x), the last filling the remaining bytes ("127.1",
// "2130706433", "0x7f000001", "017700000001", "0"), with an optional
// trailing dot. ok is false for a host name; err is set for a host whose
// last label is a number but that is not a valid address ("1.2.3.4.5",
// "999.1.1.1"), which no resolver should be asked about either.
// "localhost" and names under ".localhost" (RFC 6761) are the loopback
// address.
func literalHost(host string) (ip netip.Addr, ok bool, err error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.WithZone(""), true, nil
	}
	if isLocalhost(host) {
		return netip.AddrFrom4([4]byte{127, 0, 0, 1}), true, nil
	}
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	parts := strings.Split(h, ".")
	if !numericLabel(parts[len(parts)-1]) {
		return netip.Addr{}, false, nil
	}
	bad := fmt.Errorf("%w: host %q looks like an IPv4 address but is not one", ErrInvalidURL, host)
	if len(parts) > 4 {
		return netip.Addr{}, true, bad
	}
	var v uint64
	for i, p := range parts {
		n, ok := ipv4Part(p)
		if !ok {
			return netip.Addr{}, true, bad
		}
		if i < len(parts)-1 {
			if n > 255 {
				return netip.Addr{}, true, bad
			}
			v = v<<8 | n
			continue
		}
		rest := uint(8 * (4 - i)) // bits the last part fills
		if n >= 1<<rest {
			return netip.Addr{}, true, bad
		}
		v = v<<rest | n
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true, nil
}

// isLocalhost reports whether host is "localhost" or a name under it.
func isLocalhost(host string) bool {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	return h == "localhost" || strings.HasSuffix(h, ".localhost")
}

// numericLabel reports whether a host label is written as a number:
// decimal digits, or 0x and hexadecimal digits (whatever its value).
func numericLabel(p string) bool {
	digits, hex := p, false
	if rest, ok := strings.CutPrefix(p, "0x"); ok {
		digits, hex = rest, true
	}
	if digits == "" {
		return hex
	}
	for _, c := range digits {
		if !('0' <= c && c <= '9' || hex && ('a' <= c && c <= 'f')) {
			return false
		}
	}
	return true
}

// ipv4Part reads one part of a numeric IPv4 host: decimal, octal with a
// leading 0, or hexadecimal with 0x ("0x" alone is 0).
func ipv4Part(p string) (uint64, bool) {
	if p == "" {
		return 0, false
	}
	base, digits := 10, p
	switch {
	case strings.HasPrefix(p, "0x"):
		base, digits = 16, p[2:]
		if digits == "" {
			return 0, true
		}
	case len(p) > 1 && p[0] == '0':
		base, digits = 8, p[1:]
	}
	if len(digits) > 32 {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, base, 64)
	if err != nil || n > 1<<32-1 {
		return 0, false
	}
	return n, true
}
