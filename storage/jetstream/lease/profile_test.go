package lease

import (
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
)

// scaleProfileEnv names a path prefix: when set, the many-feeds
// measurement writes heap profiles of the whole process (servers and
// nodes) around the first node's initial load, <prefix>-before.pb.gz and
// <prefix>-after.pb.gz, to be compared with go tool pprof -base.
const scaleProfileEnv = "SLOGFEED_SCALE_HEAPPROFILE"

// writeHeapProfile writes the in-use heap, after a collection, to the
// profile file named by scaleProfileEnv and suffix (nothing when unset).
func writeHeapProfile(tb testing.TB, suffix string) {
	tb.Helper()
	prefix := os.Getenv(scaleProfileEnv)
	if prefix == "" {
		return
	}
	runtime.GC()
	f, err := os.Create(prefix + "-" + suffix + ".pb.gz")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		tb.Fatal(err)
	}
}
