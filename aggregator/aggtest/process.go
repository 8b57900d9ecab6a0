package aggtest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A benchmark serves its Fleet from a process of its own, so that what it
// measures of its own process is slogfeed's alone: StartFleetProcess runs
// the test binary again for one test (named by the benchmark's package,
// whose body is ServeFleetProcess), passing the fleet in an environment
// variable; the child writes its addresses on a line of standard output
// and serves until its standard input closes.

// StartFleetProcess serves a Fleet of the epoch given on hosts loopback
// addresses from the test binary run again for test, which must call
// ServeFleetProcess with the same env. The process ends at tb's cleanup.
// It returns the Fleet and the process ID.
func StartFleetProcess(tb testing.TB, test, env string, epoch time.Time, period time.Duration, items, hosts int) (*Fleet, int) {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.timeout=0")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d %d %d %d", env, epoch.UnixNano(), int64(period), items, hosts))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		tb.Fatalf("fleet publisher: %v", err)
	}
	return FleetAt(epoch, period, items, strings.Split(strings.TrimSpace(line), ",")), cmd.Process.Pid
}

// ServeFleetProcess is the body of the test StartFleetProcess runs: with
// env set it serves the fleet env describes until standard input closes;
// without it, the test is skipped (it runs only for a benchmark).
func ServeFleetProcess(t *testing.T, env string) {
	spec := os.Getenv(env)
	if spec == "" {
		t.Skip("serves a benchmark's fleet when the benchmark runs it")
	}
	var epoch, period int64
	var items, hosts int
	if _, err := fmt.Sscan(spec, &epoch, &period, &items, &hosts); err != nil {
		t.Fatalf("%s=%q: %v", env, spec, err)
	}
	p, stop, err := ServeFleet(time.Unix(0, epoch), time.Duration(period), items, hosts)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	fmt.Println(strings.Join(p.Hosts(), ","))
	_, _ = io.Copy(io.Discard, os.Stdin)
}
