package storage

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
)

// The records every poll rewrites leave their zero fields out, and the
// records an earlier version wrote with every field spelled out read the
// same. An observation is binary (obsenc.go), so smaller than its JSON
// without zero fields; the JSON an older slogfeed stored reads the same.
func TestRecordsLeaveZeroFieldsOut(t *testing.T) {
	at := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		encode  func() ([]byte, error)
		absent  []string // keys the encoding must not hold
		present []string
		long    string // the same record, zero fields spelled out
		partial bool   // long leaves out other fields (no size to compare)
		decode  func([]byte) (any, error)
		want    any
	}{
		{
			name: "observation, hit without hints",
			encode: func() ([]byte, error) {
				return marshalObservation(&Observation{At: at, Hit: true, Published: []time.Time{at}, LatencyS: []float64{1.5}, Status: 200})
			},
			long:   `{"at":"2026-11-21T12:00:00Z","hit":true,"published":["2026-11-21T12:00:00Z"],"hints":{"Desync":0,"Phase":0,"HasPhase":false,"CacheFor":0,"Period":0,"Due":0,"HasDue":false},"latency_s":[1.5],"status":200}`,
			decode: decodeStoredObservation,
			want:   Observation{At: at, Hit: true, Published: []time.Time{at}, LatencyS: []float64{1.5}, Status: 200},
		},
		{
			name: "observation, miss with one hint",
			encode: func() ([]byte, error) {
				return marshalObservation(&Observation{At: at, Hints: schedule.Hints{CacheFor: time.Minute}, Status: 304})
			},
			long:   `{"at":"2026-11-21T12:00:00Z","hit":false,"hints":{"Desync":0,"Phase":0,"HasPhase":false,"CacheFor":60000000000,"Period":0,"Due":0,"HasDue":false},"status":304}`,
			decode: decodeStoredObservation,
			want:   Observation{At: at, Hints: schedule.Hints{CacheFor: time.Minute}, Status: 304},
		},
		{
			name: "feed without errors, sleep or hits",
			encode: func() ([]byte, error) {
				return marshalFeed(&Feed{ID: 7, Kind: KindRemote, URL: "https://example.org/a.rss", Policy: "auto", Created: at, Updated: at})
			},
			absent:  []string{`"sleep"`, `"last_error_at"`, `"retry_after"`, `"last_fetch"`, `"last_hit"`},
			present: []string{`"policy":"auto"`, `"created":"2026-11-21T12:00:00Z"`},
			long:    `{"id":7,"kind":"remote","url":"https://example.org/a.rss","policy":"auto","sleep":{"SkipHours":0,"SkipDays":0,"Daily":null,"Windows":null},"next_fetch":"0001-01-01T00:00:00Z","last_error_at":"0001-01-01T00:00:00Z","retry_after":"0001-01-01T00:00:00Z","last_fetch":"0001-01-01T00:00:00Z","last_hit":"0001-01-01T00:00:00Z","created":"2026-11-21T12:00:00Z","updated":"2026-11-21T12:00:00Z"}`,
			decode:  decodeAs[Feed],
			want:    Feed{ID: 7, Kind: KindRemote, URL: "https://example.org/a.rss", Policy: "auto", Created: at, Updated: at},
		},
		{
			name: "feed with a sleep plan and an error",
			encode: func() ([]byte, error) {
				return marshalFeed(&Feed{ID: 8, Kind: KindRemote, Policy: "auto", Sleep: schedule.SleepPlan{SkipHours: 1}, LastErrorAt: at})
			},
			present: []string{`"sleep":{"SkipHours":1`, `"last_error_at":"2026-11-21T12:00:00Z"`},
			absent:  []string{`"retry_after"`},
			partial: true,
			long:    `{"id":8,"kind":"remote","policy":"auto","sleep":{"SkipHours":1,"SkipDays":0,"Daily":null,"Windows":null},"last_error_at":"2026-11-21T12:00:00Z","retry_after":"0001-01-01T00:00:00Z"}`,
			decode:  decodeAs[Feed],
			want:    Feed{ID: 8, Kind: KindRemote, Policy: "auto", Sleep: schedule.SleepPlan{SkipHours: 1}, LastErrorAt: at},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := tt.encode()
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range tt.absent {
				if strings.Contains(string(raw), k) {
					t.Errorf("encoding holds %s: %s", k, raw)
				}
			}
			for _, k := range tt.present {
				if !strings.Contains(string(raw), k) {
					t.Errorf("encoding lacks %s: %s", k, raw)
				}
			}
			if !tt.partial && len(raw) >= len(tt.long) {
				t.Errorf("encoding is %d bytes, the spelled-out record %d", len(raw), len(tt.long))
			}
			for _, in := range []string{string(raw), tt.long} {
				got, err := tt.decode([]byte(in))
				if err != nil {
					t.Fatalf("decode %s: %v", in, err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("decode %s:\n got %+v\nwant %+v", in, got, tt.want)
				}
			}
		})
	}
}

func decodeAs[T any](raw []byte) (any, error) {
	var v T
	err := json.Unmarshal(raw, &v)
	return v, err
}

func decodeStoredObservation(raw []byte) (any, error) { return decodeObservation(raw) }
