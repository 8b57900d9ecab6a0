package fetcher

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
)

func TestLiteralHost(t *testing.T) {
	tests := []struct {
		host    string
		want    string // "" for a host name
		invalid bool
	}{
		{"127.0.0.1", "127.0.0.1", false},
		{"127.1", "127.0.0.1", false},
		{"127.0.1", "127.0.0.1", false},
		{"2130706433", "127.0.0.1", false},
		{"0x7f000001", "127.0.0.1", false},
		{"0X7F000001", "127.0.0.1", false},
		{"017700000001", "127.0.0.1", false},
		{"0177.0.0.1", "127.0.0.1", false},
		{"0x7f.1", "127.0.0.1", false},
		{"0", "0.0.0.0", false},
		{"0x", "0.0.0.0", false},
		{"127.0.0.1.", "127.0.0.1", false},
		{"2852039166", "169.254.169.254", false},
		{"0xa9.0xfe.0xa9.0xfe", "169.254.169.254", false},
		{"10.1", "10.0.0.1", false},
		{"192.168.257", "192.168.1.1", false},
		{"8.8.8.8", "8.8.8.8", false},
		{"::1", "::1", false},
		{"fe80::1%eth0", "fe80::1", false},
		{"localhost", "127.0.0.1", false},
		{"LOCALHOST.", "127.0.0.1", false},
		{"metadata.localhost", "127.0.0.1", false},
		{"example.org", "", false},
		{"feeds.example.org.", "", false},
		{"1a.example", "", false},
		{"123.example", "", false},
		{"0xgg", "", false},
		{"1.2.3.4.5", "", true},
		{"256.1.1.1", "", true},
		{"1.2.3.256", "", true},
		{"1.2.65536", "", true},
		{"4294967296", "", true},
		{"0x100000000", "", true},
		{"08", "", true},
		{"1.2.3.09", "", true},
		{"example.123", "", true},
		{"1..2", "", true},
		{"99999999999999999999999999999999999999", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			ip, ok, err := literalHost(tt.host)
			switch {
			case tt.invalid:
				if !ok || !errors.Is(err, ErrInvalidURL) {
					t.Errorf("literalHost(%q) = %v, %v, %v; want an invalid address", tt.host, ip, ok, err)
				}
			case tt.want == "":
				if ok || err != nil {
					t.Errorf("literalHost(%q) = %v, %v, %v; want a host name", tt.host, ip, ok, err)
				}
			default:
				if !ok || err != nil || ip != netip.MustParseAddr(tt.want) {
					t.Errorf("literalHost(%q) = %v, %v, %v; want %s", tt.host, ip, ok, err, tt.want)
				}
			}
		})
	}
}

// FuzzLiteralHost: a host is a name, an address or invalid; an address
// found is what the host says, and its usual form reads back the same.
func FuzzLiteralHost(f *testing.F) {
	for _, s := range []string{"127.1", "0x7f000001", "017700000001", "0", "1.2.3.4.5", "example.org", "::1", "0x", "08", "localhost"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		ip, ok, err := literalHost(host)
		if !ok {
			if err != nil || ip.IsValid() {
				t.Fatalf("literalHost(%q) = %v, %v, %v", host, ip, ok, err)
			}
			return
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidURL) || ip.IsValid() {
				t.Fatalf("literalHost(%q) = %v, %v, %v", host, ip, ok, err)
			}
			return
		}
		again, ok2, err2 := literalHost(ip.String())
		if !ip.IsValid() || !ok2 || err2 != nil || again != ip {
			t.Fatalf("literalHost(%q) = %v, but its usual form reads %v, %v, %v", host, ip, again, ok2, err2)
		}
	})
}

// countTransport counts the requests that would have left the machine.
type countTransport struct {
	n    atomic.Int64
	host atomic.Value // the last request's URL host
}

func (c *countTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	c.host.Store(r.URL.Host)
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
}

func TestCheckURL(t *testing.T) {
	tr := &countTransport{}
	f := New(Options{Transport: tr, Allow: []netip.Prefix{netip.MustParsePrefix("192.168.7.0/24")}})
	tests := []struct {
		raw, want string
		err       error
	}{
		{"http://127.1/", "", ErrBlocked},
		{"http://2130706433:8080/feed", "", ErrBlocked},
		{"http://[::ffff:a9fe:a9fe]/", "", ErrBlocked},
		{"http://localhost/", "", ErrBlocked},
		{"ftp://example.org/", "", ErrScheme},
		{"http:///feed", "", ErrInvalidURL},
		{"http://1.2.3.4.5/", "", ErrInvalidURL},
		{"http://feeds.example.org:99999/a.xml", "", ErrInvalidURL},
		{"http://feeds.example.org:0/a.xml", "", ErrInvalidURL},
		{"http://feeds.example.org:65535/a.xml", "http://feeds.example.org:65535/a.xml", nil},
		{"http://0x08080808/feed.xml", "http://8.8.8.8/feed.xml", nil},
		{"http://0xc0a80705:8080/lab", "http://192.168.7.5:8080/lab", nil}, // allow-listed
		{"http://192.168.7.5/lab", "http://192.168.7.5/lab", nil},
		{"https://feeds.example.org/a.xml", "https://feeds.example.org/a.xml", nil},
		{"http://u:pw@8.8.8.8/", "http://u:pw@8.8.8.8/", nil},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			got, err := f.CheckURL(tt.raw)
			if !errors.Is(err, tt.err) || got != tt.want {
				t.Errorf("CheckURL(%q) = %q, %v; want %q, %v", tt.raw, got, err, tt.want, tt.err)
			}
			if errors.Is(err, ErrBlocked) && !strings.Contains(err.Error(), "not allowed") {
				t.Errorf("error %q does not say \"not allowed\"", err)
			}
		})
	}
	// Fetching a numeric form connects to the address itself, and a
	// blocked one is refused before any request.
	if _, err := f.Fetch(context.Background(), Request{URL: "http://0177.0.0.1/"}); !errors.Is(err, ErrBlocked) {
		t.Errorf("fetch of 0177.0.0.1: %v", err)
	}
	if tr.n.Load() != 0 {
		t.Errorf("%d requests sent for blocked hosts", tr.n.Load())
	}
	_, err := f.Fetch(context.Background(), Request{URL: "http://0xc0a80705/lab"})
	if err != nil || tr.n.Load() != 1 || tr.host.Load() != "192.168.7.5" {
		t.Errorf("fetch of 0xc0a80705: %v, %d requests, to host %v", err, tr.n.Load(), tr.host.Load())
	}
}
