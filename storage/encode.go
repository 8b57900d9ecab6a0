package storage

import "encoding/json"

// The records a poll writes are its feed record, stored as JSON encoded
// by encoding/json, its new items and its observation, stored in binary
// forms (itemenc.go, obsenc.go).

// marshalFeed encodes a feed record.
func marshalFeed(f *Feed) ([]byte, error) { return json.Marshal(f) }

// marshalObservation encodes an observation (obsenc.go).
func marshalObservation(o *Observation) ([]byte, error) {
	n := 32 + 16*len(o.Published) + 9*len(o.LatencyS) + len(o.Err) // enough but for long lists
	return appendObservation(make([]byte, 0, n), o)
}

// marshalItem encodes an item with seq as its Seq as JSON, the form an
// older slogfeed stored and the one MaxItemSize bounds.
func marshalItem(it *Item, seq uint64) ([]byte, error) {
	c := *it
	c.Seq = seq
	return json.Marshal(&c)
}
