package storage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
)

// latencyKey is how the latencies of an Observation stored as JSON (by an
// older slogfeed) begin. They were encoded by json.Marshal, which writes
// no spaces, and no other field of an Observation holds a key of that
// name; inside a JSON string the quotes would be escaped, so the key
// cannot be matched there.
var latencyKey = []byte(`"latency_s":[`)

// RecentLatencies returns the publish-to-fetch latencies, in seconds,
// recorded by the newest polls observations of each feed of ids (of every
// feed when ids is nil), oldest first, read in one transaction. Feeds
// without latencies in those observations are absent from the map, and so
// are ids that name no feed. polls ≤ 0 means every kept observation.
//
// It reads only the latencies of each observation, so it is much cheaper
// than Observations for a list of many feeds.
func (s *Store) RecentLatencies(ids []uint64, polls int) (map[uint64][]float64, error) {
	out := make(map[uint64][]float64)
	err := s.db.View(func(tx *bolt.Tx) error {
		feeds, err := bucket(tx, bucketFeeds)
		if err != nil {
			return err
		}
		if ids == nil {
			c := feeds.Cursor()
			for k, _ := c.First(); k != nil; k, _ = c.Next() {
				if id, ok := getU64(k); ok {
					ids = append(ids, id)
				}
			}
		}
		var buf []float64
		for _, id := range ids {
			fb, err := openFeedBuckets(tx, id)
			if err != nil {
				return err
			}
			if fb == nil {
				continue
			}
			tail, err := feedTail(feeds, id)
			if err != nil {
				return err
			}
			buf, err = recentLatencies(fb.obs, tail, id, s.obsKept(polls), buf[:0])
			if err != nil {
				return err
			}
			if len(buf) > 0 {
				out[id] = append([]float64(nil), buf...)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("storage: recent latencies: %w", err)
	}
	return out, nil
}

// recentLatencies appends to dst the latencies of the newest polls
// observations in the obs bucket b followed by the tail, oldest first. It
// walks back from the newest observation once, appending each one's
// latencies reversed, and reverses what it appended at the end.
func recentLatencies(b view, tail [][]byte, feedID uint64, polls int, dst []float64) ([]float64, error) {
	start := len(dst)
	n := 0
	for i := len(tail) - 1; i >= 0 && (polls <= 0 || n < polls); i-- {
		from := len(dst)
		var err error
		dst, err = appendLatencies(dst, tail[i])
		if err != nil {
			return nil, corruptf("feed %d: observation tail[%d]: %v", feedID, i, err)
		}
		slices.Reverse(dst[from:])
		n++
	}
	c := b.Cursor()
	for k, v := c.Last(); k != nil && (polls <= 0 || n < polls); k, v = c.Prev() {
		from := len(dst)
		var err error
		dst, err = appendLatencies(dst, v)
		if err != nil {
			return nil, corruptf("feed %d: observation %x: %v", feedID, k, err)
		}
		slices.Reverse(dst[from:])
		n++
	}
	slices.Reverse(dst[start:])
	return dst, nil
}

// appendLatencies appends the latencies of one stored Observation to dst.
// It reads a binary one (obsenc.go) up to its latencies. Of one stored as
// JSON it finds and parses the array itself, and falls back on
// encoding/json when the array is not the plain list of numbers that
// json.Marshal writes.
func appendLatencies(dst []float64, raw []byte) ([]float64, error) {
	if len(raw) > 0 && raw[0] == obsTag {
		r := obsReader{b: raw}
		var stack [8]time.Time
		h := r.readHeader(stack[:0])
		n := len(dst)
		dst = r.appendLatencies(&h, dst)
		if r.err != nil {
			return dst[:n], r.err
		}
		return dst, nil
	}
	i := bytes.Index(raw, latencyKey)
	if i < 0 {
		return dst, nil
	}
	rest := raw[i+len(latencyKey):]
	end := bytes.IndexByte(rest, ']')
	if end < 0 {
		return dst, fmt.Errorf("unterminated latency_s")
	}
	n := len(dst)
	for f := range bytes.SplitSeq(rest[:end], []byte{','}) {
		if !jsonNumber(f) {
			return decodeLatencies(dst[:n], raw)
		}
		v, err := strconv.ParseFloat(string(f), 64)
		if err != nil {
			return decodeLatencies(dst[:n], raw)
		}
		dst = append(dst, v)
	}
	return dst, nil
}

// jsonNumber reports whether b is made of the characters of a JSON number
// (strconv.ParseFloat also takes "NaN", "Inf" and hexadecimal, which JSON
// does not).
func jsonNumber(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if (c < '0' || c > '9') && c != '-' && c != '+' && c != '.' && c != 'e' && c != 'E' {
			return false
		}
	}
	return true
}

// decodeLatencies is appendLatencies through encoding/json.
func decodeLatencies(dst []float64, raw []byte) ([]float64, error) {
	var o struct {
		LatencyS []float64 `json:"latency_s"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return dst, err
	}
	return append(dst, o.LatencyS...), nil
}
