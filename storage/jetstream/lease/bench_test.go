package lease

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage/jetstream/jstest"
)

// BenchmarkFailover kills one of three nodes b.N times (round robin, no
// lease given back, its connection dropped) on an embedded 3-server
// JetStream cluster, with the default lease timing, and measures how long
// until every shard is owned again; a fresh node then joins and the share
// evens out before the next kill. It reports the median and the maximum.
//
//	go test -run xxx -bench BenchmarkFailover -benchtime 20x ./storage/jetstream/lease/
func BenchmarkFailover(b *testing.B) {
	c := jstest.NewCluster(b, 3)
	var nodes []*testNode
	for i := range 3 {
		nodes = append(nodes, startNode(b, c, fmt.Sprintf("n%d", i), nil))
	}
	waitFor(b, 30*time.Second, "even share", func() error { return even(nodes) })
	var took []time.Duration
	b.ResetTimer()
	for i := range b.N {
		victim := i % len(nodes)
		nodes[victim].kill()
		survivors := slices.Delete(slices.Clone(nodes), victim, victim+1)
		took = append(took, waitFor(b, 30*time.Second, "re-owned", func() error {
			for s, o := range ownership(survivors) {
				if len(o) != 1 {
					return fmt.Errorf("shard %d owners %v", s, o)
				}
			}
			return nil
		}))
		b.StopTimer()
		nodes[victim] = startNode(b, c, fmt.Sprintf("r%d", i), nil)
		waitFor(b, 60*time.Second, "even share after the join", func() error { return even(nodes) })
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(took[len(took)/2].Seconds(), "median-s")
	b.ReportMetric(took[len(took)-1].Seconds(), "max-s")
	b.ReportMetric(took[0].Seconds(), "min-s")
}
