package fetcher

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

func TestGuardAddresses(t *testing.T) {
	blocked := []string{
		"127.0.0.1", "127.0.0.2", "10.1.2.3", "172.16.0.1", "172.31.255.255",
		"192.168.1.1", "100.64.0.1", "100.127.255.254", "169.254.169.254",
		"0.0.0.0", "0.1.2.3", "224.0.0.1", "239.255.255.250", "255.255.255.255",
		"240.0.0.1", "198.18.0.1", "192.0.2.1",
		"::", "::1", "fc00::1", "fd12:3456::1", "fe80::1", "fe80::1%eth0", "ff02::1", "ff05::2",
		"::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254",
		"64:ff9b::7f00:1", "64:ff9b::a00:1", "2002:7f00:1::1", "2002:c0a8:101::1",
		"::127.0.0.1", "2001:db8::1",
	}
	public := []string{
		"8.8.8.8", "1.1.1.1", "93.184.216.34", "100.128.0.1", "172.32.0.1",
		"2606:4700:4700::1111", "2a00:1450:4001::1", "::ffff:8.8.8.8",
		"64:ff9b::808:808", "2002:808:808::1",
	}
	g := &guard{}
	for _, s := range blocked {
		ip := netip.MustParseAddr(s)
		if err := g.check(ip, 80); !errors.Is(err, ErrBlocked) {
			t.Errorf("%s: got %v, want ErrBlocked", s, err)
		}
	}
	for _, s := range public {
		if err := g.check(netip.MustParseAddr(s), 80); err != nil {
			t.Errorf("%s: %v, want allowed", s, err)
		}
	}

	// The allow-list lets exactly its prefixes through, in any form.
	g = &guard{allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.9.0.0/16")}}
	for s, ok := range map[string]bool{
		"127.0.0.1": true, "::ffff:127.0.0.1": true, "10.9.3.4": true,
		"127.0.0.2": false, "::1": false, "10.8.0.1": false,
	} {
		err := g.check(netip.MustParseAddr(s), 80)
		if ok != (err == nil) {
			t.Errorf("allow-list, %s: got %v, want allowed=%v", s, err, ok)
		}
	}
	// An allowed endpoint lets its address through on its port only.
	g = &guard{endpoints: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:8123")}}
	for _, tc := range []struct {
		addr string
		port uint16
		ok   bool
	}{
		{"127.0.0.1", 8123, true}, {"::ffff:127.0.0.1", 8123, true},
		{"127.0.0.1", 80, false}, {"127.0.0.1", 8080, false}, {"127.0.0.2", 8123, false}, {"::1", 8123, false},
	} {
		err := g.check(netip.MustParseAddr(tc.addr), tc.port)
		if tc.ok != (err == nil) {
			t.Errorf("endpoint, %s port %d: got %v, want allowed=%v", tc.addr, tc.port, err, tc.ok)
		}
	}
	if err := (&guard{allowAll: true}).check(netip.MustParseAddr("127.0.0.1"), 80); err != nil {
		t.Errorf("AllowAll: %v", err)
	}

	err := (&guard{}).check(netip.MustParseAddr("::ffff:10.0.0.1"), 80)
	if err == nil || !strings.Contains(err.Error(), "IPv4-mapped private") {
		t.Errorf("message: %v", err)
	}
}

func TestGuardControl(t *testing.T) {
	g := &guard{}
	for _, c := range []struct {
		network, address string
		ok               bool
	}{
		{"tcp4", "8.8.8.8:80", true},
		{"tcp6", "[2606:4700:4700::1111]:443", true},
		{"tcp4", "127.0.0.1:80", false},
		{"tcp6", "[::1]:80", false},
		{"tcp6", "[fe80::1%lo]:80", false},
		{"udp4", "8.8.8.8:53", false},
		{"tcp", "example.org:80", false}, // never a name at this point
		{"tcp", "garbage", false},
	} {
		err := g.control(c.network, c.address, nil)
		if c.ok != (err == nil) {
			t.Errorf("%s %s: %v", c.network, c.address, err)
		}
		if err != nil && !errors.Is(err, ErrBlocked) {
			t.Errorf("%s %s: %v is not ErrBlocked", c.network, c.address, err)
		}
	}
}

// fakeResolver answers A and AAAA queries from table (NXDOMAIN for other
// names) over an in-memory connection: no network, no system resolver.
func fakeResolver(table map[string][]netip.Addr) *net.Resolver {
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
			client, server := net.Pipe()
			go serveDNS(server, table)
			return client, nil
		},
	}
}

// serveDNS speaks DNS over a stream (two-byte length prefix) on c.
func serveDNS(c net.Conn, table map[string][]netip.Addr) {
	defer c.Close()
	for {
		var l [2]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return
		}
		msg := make([]byte, binary.BigEndian.Uint16(l[:]))
		if _, err := io.ReadFull(c, msg); err != nil {
			return
		}
		var p dnsmessage.Parser
		h, err := p.Start(msg)
		if err != nil {
			return
		}
		q, err := p.Question()
		if err != nil {
			return
		}
		name := strings.ToLower(strings.TrimSuffix(q.Name.String(), "."))
		addrs, known := table[name]
		rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionAvailable: true}
		if !known {
			rh.RCode = dnsmessage.RCodeNameError
		}
		b := dnsmessage.NewBuilder(make([]byte, 2, 514), rh)
		b.EnableCompression()
		_ = b.StartQuestions()
		_ = b.Question(q)
		_ = b.StartAnswers()
		for _, a := range addrs {
			rr := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}
			switch {
			case a.Is4() && q.Type == dnsmessage.TypeA:
				_ = b.AResource(rr, dnsmessage.AResource{A: a.As4()})
			case a.Is6() && q.Type == dnsmessage.TypeAAAA:
				_ = b.AAAAResource(rr, dnsmessage.AAAAResource{AAAA: a.As16()})
			}
		}
		out, err := b.Finish()
		if err != nil {
			return
		}
		binary.BigEndian.PutUint16(out, uint16(len(out)-2))
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}
