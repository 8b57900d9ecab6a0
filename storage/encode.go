package storage

import "encoding/json"

// The records a poll writes are its feed record and its new items, stored
// as JSON encoded by encoding/json, and its observation, stored in a
// binary form (obsenc.go).

// marshalFeed encodes a feed record.
func marshalFeed(f *Feed) ([]byte, error) { return json.Marshal(f) }

// marshalObservation encodes an observation (obsenc.go).
func marshalObservation(o *Observation) ([]byte, error) {
	n := 32 + 16*len(o.Published) + 9*len(o.LatencyS) + len(o.Err) // enough but for long lists
	return appendObservation(make([]byte, 0, n), o)
}

// marshalItem encodes an item with seq as its Seq.
func marshalItem(it *Item, seq uint64) ([]byte, error) {
	c := *it
	c.Seq = seq
	return json.Marshal(&c)
}
