package eval

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

func TestBudgetDriverTmp(t *testing.T) {
	if os.Getenv("BUDGET") == "" {
		t.Skip()
	}
	st := time.Now()
	rep, err := Budget().Run(context.Background(), Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Rows {
		fmt.Printf("%-12s wl=%v med=%7.2f mean=%7.2f p90=%7.1f hit=%6.2f polls=%d items=%d %v\n", r.Policy, r.Extra["weighted_latency_s"], r.MedianLatencyS, r.MeanLatencyS, r.P90LatencyS, r.HitPct, r.Polls, r.Items, r.Extra)
	}
	fmt.Println(rep.Notes, time.Since(st))
}
