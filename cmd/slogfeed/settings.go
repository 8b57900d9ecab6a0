package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/transform"
	"github.com/slogfeed/slogfeed/web"
)

// serveSettings is the configuration table of `slogfeed serve`: each
// setting's flag, environment variable, default and meaning, followed by
// the cluster's (clusterSettings). `slogfeed help serve` prints it, and
// docs/configuration.md is written from it (TestConfigurationDoc -update). Without --nats
// and --nats-embed, serve is a single slogfeed on its bbolt file.
func serveSettings(getenv func(string) string) []setting {
	return append([]setting{
		{Name: "addr", Env: "SLOGFEED_ADDR", Default: "127.0.0.1:8080", Doc: "HTTP listen `ADDRESS`", Check: checkAddr},
		{Name: "data", Env: "SLOGFEED_DATA", Default: defaultDataDir(getenv), Doc: "data `DIR` (holds slogfeed.db)"},
		{Name: "demo", Env: "SLOGFEED_DEMO", Default: "false", Doc: "start simulated sensor publishers on loopback and subscribe to them", Check: checkBool, Bool: true},
		{Name: "allow", Env: "SLOGFEED_ALLOW", Default: "", Doc: "comma-separated `CIDRS` the fetcher may reach although they are private or loopback", Check: func(s string) error { _, err := parsePrefixes(s); return err }},
		{Name: "rate", Env: "SLOGFEED_RATE", Default: "0", Doc: "fetch budget in fetches per `SECOND` (0 = unlimited)", Check: checkFloat},
		{Name: "per-host", Env: "SLOGFEED_PER_HOST", Default: "4", Doc: "concurrent fetches per host (`N`)", Check: checkInt},
		{Name: "workers", Env: "SLOGFEED_WORKERS", Default: "16", Doc: "fetch workers (`N`)", Check: checkInt},
		{Name: "token", Env: "SLOGFEED_TOKEN", Default: "", Doc: "bearer `TOKEN` required for changes (generated and printed when listening off loopback without one)"},
		{Name: "public-url", Env: "SLOGFEED_PUBLIC_URL", Default: "", Doc: "public base `URL` of this slogfeed, for self links, the WebSub hub and callbacks (empty: http://ADDRESS)", Check: checkPublicURL},
		{Name: "id-authority", Env: "SLOGFEED_ID_AUTHORITY", Default: "", Doc: "tag authority (a DNS `NAME` or e-mail address) of the sensor and pipe feeds' Atom ids, in place of the one stored at the first start (the host of the public URL then); changing it changes every id", Check: checkIDAuthority},
		{Name: "websub", Env: "SLOGFEED_WEBSUB", Default: "true", Doc: "be the WebSub hub of the sensor and pipe feeds and subscribe to the hubs remote feeds advertise", Check: checkBool, Bool: true},
		{Name: "pipe-time", Env: "SLOGFEED_PIPE_TIME", Default: "10s", Doc: "time limit of one pipe run or preview (`DURATION`), checked by every operator between items", Check: checkPipeTime},
		{Name: "pipe-node-bytes", Env: "SLOGFEED_PIPE_NODE_BYTES", Default: "32MiB", Doc: "`BYTES` one node of a pipe run or preview may materialise (KiB, MiB, GiB suffixes)", Check: checkBytes},
		{Name: "pipe-run-bytes", Env: "SLOGFEED_PIPE_RUN_BYTES", Default: "128MiB", Doc: "`BYTES` all the nodes of a pipe run or preview may materialise together", Check: checkBytes},
		{Name: "regex-input", Env: "SLOGFEED_REGEX_INPUT", Default: "16KiB", Doc: "`BYTES` of a field a regex operator matches in; the rest of the field is kept as it is", Check: checkBytes},
		{Name: "keep-items", Env: "SLOGFEED_KEEP_ITEMS", Default: "200", Doc: "newest items (`N`, by publish time) a new remote feed of a single node keeps unless given a retention of its own; 0 keeps every item. A pipe's output keeps what its definition says (default 500), sensor feeds every reading", Check: checkKeepItems},
		{Name: "previews", Env: "SLOGFEED_PREVIEWS", Default: "2", Doc: "pipe previews and requested runs (`N`) that run at once; one more is answered 429", Check: checkInt},
	}, clusterSettings()...)
}

// checkPipeTime accepts a duration from 100ms to 10m.
func checkPipeTime(s string) error {
	if d, err := time.ParseDuration(s); err != nil || d < 100*time.Millisecond || d > 10*time.Minute {
		return errors.New("want a duration from 100ms to 10m, such as 10s")
	}
	return nil
}

// checkBytes accepts a size parseBytes reads, from 1 KiB to 64 GiB.
func checkBytes(s string) error {
	n, err := parseBytes(s)
	if err == nil && (n < 1<<10 || n > 64<<30) {
		err = errors.New("want 1KiB to 64GiB")
	}
	return err
}

// parseBytes reads a size in bytes: an integer, maybe followed by KiB,
// MiB or GiB (or K, M, G, all powers of 1024).
func parseBytes(s string) (int64, error) {
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}} {
		if rest, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("want a size such as 65536, 64KiB or 32MiB, not %q", s)
	}
	return n * mult, nil
}

// pipeLimits are the limits of pipe runs and previews the settings give.
func pipeLimits(v map[string]string) transform.Limits {
	lim := transform.Limits{}
	lim.RunTime, _ = time.ParseDuration(v["pipe-time"])
	lim.MaxNodeBytes, _ = parseBytes(v["pipe-node-bytes"])
	lim.MaxRunBytes, _ = parseBytes(v["pipe-run-bytes"])
	rx, _ := parseBytes(v["regex-input"])
	lim.MaxRegexInput = int(rx)
	return lim
}

// checkPublicURL accepts an empty value or an absolute http(s) URL without
// query or fragment.
func checkPublicURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return errors.New("want an absolute http or https URL without query, e.g. https://slog.example.org")
	}
	return nil
}

// checkIDAuthority accepts an empty value or a tag URI authority name.
func checkIDAuthority(s string) error {
	if s != "" && !web.ValidIDAuthority(s) {
		return errors.New("want a DNS name or an e-mail address, e.g. slog.example.org")
	}
	return nil
}

// defaultDataDir is $XDG_DATA_HOME/slogfeed, else ~/.local/share/slogfeed,
// else ./slogfeed-data.
func defaultDataDir(getenv func(string) string) string {
	if d := getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "slogfeed")
	}
	if h, err := os.UserHomeDir(); err == nil && h != "" {
		return filepath.Join(h, ".local", "share", "slogfeed")
	}
	return "slogfeed-data"
}

func checkAddr(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("want HOST:PORT: %w", err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err == nil || port == "" {
		return nil
	}
	if strings.Trim(port, "0123456789") == "" {
		return fmt.Errorf("want a port of 0 to 65535, not %s", port)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("want HOST:PORT: unknown port %q", port)
	}
	return nil
}

func checkBool(s string) error {
	if _, err := strconv.ParseBool(s); err != nil {
		return errors.New("want true or false (or 1 or 0)")
	}
	return nil
}

func checkFloat(s string) error {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f >= 0 && f <= schedule.MaxRate) { // NaN too
		return fmt.Errorf("want a number from 0 to %v", schedule.MaxRate)
	}
	return nil
}

// checkKeepItems accepts a default item count from 0 (keep all) to 10^9.
func checkKeepItems(s string) error {
	if n, err := strconv.Atoi(s); err != nil || n < 0 || n > 1e9 {
		return errors.New("want a whole number from 0 (keep every item) to 1000000000")
	}
	return nil
}

func checkInt(s string) error {
	if n, err := strconv.Atoi(s); err != nil || n < 1 || n > 1024 {
		return errors.New("want a whole number from 1 to 1024")
	}
	return nil
}

func parsePrefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, fmt.Errorf("%q is not an address or CIDR", f)
			}
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR", f)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
