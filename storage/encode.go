package storage

import "encoding/json"

// The records a poll writes (its feed record, its observation, its new
// items) are stored as JSON, encoded by encoding/json.

// marshalFeed encodes a feed record.
func marshalFeed(f *Feed) ([]byte, error) { return json.Marshal(f) }

// marshalObservation encodes an observation.
func marshalObservation(o *Observation) ([]byte, error) { return json.Marshal(o) }

// marshalItem encodes an item with seq as its Seq.
func marshalItem(it *Item, seq uint64) ([]byte, error) {
	c := *it
	c.Seq = seq
	return json.Marshal(&c)
}
