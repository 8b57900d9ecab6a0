package web

import (
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/slogfeed/slogfeed/storage"
)

// sensorClients are the concurrent clients of BenchmarkSensorStore, each
// posting the readings of its own sensor.
var sensorClients = []int{1, 64}

// BenchmarkSensorStore measures durable readings/s with many concurrent
// clients: slogfeed's sensor store (HTTP POST over loopback, the reading
// validated, stored with fsync and answered 201 once on disk; concurrent
// readings share a commit) beside two bare bbolt loops in the same run,
// one writing each reading in a transaction of its own and one batching
// concurrent readings (bbolt's DB.Batch), both with fsync and no HTTP.
// Each sub-benchmark reports readings/s; b.N is the number of readings.
func BenchmarkSensorStore(b *testing.B) {
	for _, c := range sensorClients {
		b.Run(fmt.Sprintf("slogfeed/c%d", c), func(b *testing.B) {
			st, err := storage.Open(filepath.Join(b.TempDir(), "s.db"), storage.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			srv := httptest.NewServer(SensorHandler(st, SensorOptions{}))
			defer srv.Close()
			tr := &http.Transport{MaxIdleConnsPerHost: c}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			post := func(sensor int, v int64) error {
				body := fmt.Sprintf(`{"value": %d.5, "unit": "C"}`, v)
				resp, err := client.Post(fmt.Sprintf("%s/api/v1/sensors/s%d/readings", srv.URL, sensor), "application/json", strings.NewReader(body))
				if err != nil {
					return err
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					return fmt.Errorf("sensor %d: status %d", sensor, resp.StatusCode)
				}
				return nil
			}
			for i := range c { // the sensors' feeds are created outside the timer
				if err := post(i, 0); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			runClients(b, c, post)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "readings/s")
		})
		for _, batch := range []bool{false, true} {
			name := "bare-bbolt-tx"
			if batch {
				name = "bare-bbolt-batch"
			}
			b.Run(fmt.Sprintf("%s/c%d", name, c), func(b *testing.B) {
				db, err := bolt.Open(filepath.Join(b.TempDir(), "b.db"), 0o600, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				update := db.Update
				if batch {
					update = db.Batch
				}
				write := func(sensor int, v int64) error {
					return update(func(tx *bolt.Tx) error {
						bk, err := tx.CreateBucketIfNotExists(fmt.Appendf(nil, "s%d", sensor))
						if err != nil {
							return err
						}
						seq, _ := bk.NextSequence()
						var k [8]byte
						binary.BigEndian.PutUint64(k[:], seq)
						return bk.Put(k[:], fmt.Appendf(nil, `{"value":%d.5,"unit":"C","time":%q}`, v, time.Now().UTC().Format(time.RFC3339Nano)))
					})
				}
				b.ResetTimer()
				runClients(b, c, write)
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "readings/s")
			})
		}
	}
}

// runClients has c clients make b.N calls of do in all, client i for
// sensor i.
func runClients(b *testing.B, c int, do func(sensor int, v int64) error) {
	var next atomic.Int64
	errs := make(chan error, c)
	for i := range c {
		go func() {
			for {
				n := next.Add(1)
				if n > int64(b.N) {
					errs <- nil
					return
				}
				if err := do(i, n); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for range c {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
}
