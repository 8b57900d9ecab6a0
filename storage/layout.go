package storage

import (
	"encoding/binary"
	"time"
)

// Bucket and key names of the on-disk layout (doc.go describes it).
var (
	bucketMeta     = []byte("meta")
	bucketFeeds    = []byte("feeds")
	bucketFeedURL  = []byte("feed_url")
	bucketFeedSlug = []byte("feed_slug")
	bucketPipes    = []byte("pipes")
	bucketPipeSlug = []byte("pipe_slug")
	// bucketPluginData holds one nested bucket per plugin (plugindata.go).
	bucketPluginData = []byte("plugin_data")

	// The items and observations of all feeds (feeddata.go): the items by
	// Seq alone, every other key led by its feed's ID.
	bucketItems     = []byte("items")      // Seq → item (itemenc.go)
	bucketItemCount = []byte("item_count") // feed ID → number of items
	bucketItemSeqs  = []byte("item_seq")   // feed ID | Seq → nothing
	bucketItemIDs   = []byte("item_ids")   // feed ID | item ID → Seq
	bucketItemPub   = []byte("item_pub")   // feed ID | pubKey → nothing
	bucketObs       = []byte("obs")        // feed ID | sequence → observation (obsenc.go)

	// In meta.
	keySchema  = []byte("schema")
	keyItemSeq = []byte("item_seq")
)

// feedRanges are the data buckets whose keys begin with a feed's ID, the
// item count first.
var feedRanges = [][]byte{bucketItemCount, bucketItemSeqs, bucketItemIDs, bucketItemPub, bucketObs}

// dataBuckets are all the buckets of feeds' items and observations.
var dataBuckets = append([][]byte{bucketItems}, feedRanges...)

// u64 encodes v as an 8-byte big-endian key, so keys sort numerically.
func u64(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

// getU64 decodes an 8-byte big-endian value; ok is false for any other
// length (a missing key included).
func getU64(b []byte) (v uint64, ok bool) {
	if len(b) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(b), true
}

// pubKeyLen is the length of a published-index key.
const pubKeyLen = 8 + 4 + 8

// pubKey is the published-index key of an item: its sort time (seconds
// since the Unix epoch with the sign bit flipped, so that times before 1970
// and the zero time sort first, then nanoseconds) followed by its Seq, all
// big-endian. Keys sort by time, then by arrival.
func pubKey(t time.Time, seq uint64) []byte {
	b := make([]byte, pubKeyLen)
	binary.BigEndian.PutUint64(b[0:8], uint64(t.Unix())^(1<<63))
	binary.BigEndian.PutUint32(b[8:12], uint32(t.Nanosecond()))
	binary.BigEndian.PutUint64(b[12:20], seq)
	return b
}

// pubKeyTime decodes the time of a published-index key (in UTC).
func pubKeyTime(k []byte) time.Time {
	sec := int64(binary.BigEndian.Uint64(k[0:8]) ^ (1 << 63))
	nsec := int64(binary.BigEndian.Uint32(k[8:12]))
	return time.Unix(sec, nsec).UTC()
}

// pubKeySeq decodes the Seq of a published-index key.
func pubKeySeq(k []byte) uint64 { return binary.BigEndian.Uint64(k[12:20]) }

// sortTime is the time an item is ordered and retained by: its publish
// time, or when that is unknown (zero), the time slogfeed fetched it.
func sortTime(it *Item) time.Time {
	if !it.Published.IsZero() {
		return it.Published
	}
	return it.Fetched
}

// admissionTime is the time retention judges a new item by: its sort
// time, or the publisher's own date when that is earlier (Item.OwnDate).
func admissionTime(it *Item) time.Time {
	t := sortTime(it)
	if !it.OwnDate.IsZero() && it.OwnDate.Before(t) {
		return it.OwnDate
	}
	return t
}

// slugKey is the feed_slug key of a sensor or pipe feed.
func slugKey(kind Kind, slug string) []byte {
	return []byte(string(kind) + "/" + slug)
}
