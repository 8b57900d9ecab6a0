package storage

import (
	"encoding/binary"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Bucket and key names of the on-disk layout (doc.go describes it).
var (
	bucketMeta     = []byte("meta")
	bucketFeeds    = []byte("feeds")
	bucketFeedURL  = []byte("feed_url")
	bucketFeedSlug = []byte("feed_slug")
	bucketFeedData = []byte("feed_data")
	bucketPipes    = []byte("pipes")
	bucketPipeSlug = []byte("pipe_slug")
	// bucketPluginData holds one nested bucket per plugin (plugindata.go).
	bucketPluginData = []byte("plugin_data")

	// In meta.
	keySchema  = []byte("schema")
	keyItemSeq = []byte("item_seq")

	// In each feed's data bucket.
	bucketIDs       = []byte("ids")
	bucketItems     = []byte("items")
	bucketPublished = []byte("published")
	bucketObs       = []byte("obs")
	keyCount        = []byte("count")
)

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

// slugKey is the feed_slug key of a sensor or pipe feed.
func slugKey(kind Kind, slug string) []byte {
	return []byte(string(kind) + "/" + slug)
}

// feedBuckets are the buckets of one feed's items and observations.
type feedBuckets struct {
	root  *bolt.Bucket // feed_data/<id>
	ids   *bolt.Bucket // item ID → Seq
	items *bolt.Bucket // Seq → item JSON
	pub   *bolt.Bucket // pubKey → item ID
	obs   *bolt.Bucket // observation sequence → observation JSON
}

// count returns the number of items the feed holds.
func (fb *feedBuckets) count() uint64 {
	n, _ := getU64(fb.root.Get(keyCount))
	return n
}

// setCount stores the number of items the feed holds.
func (fb *feedBuckets) setCount(n uint64) error {
	return fb.root.Put(keyCount, u64(n))
}

// openFeedBuckets returns the data buckets of feed id, or nil when the feed
// has none (it does not exist).
func openFeedBuckets(tx *bolt.Tx, id uint64) (*feedBuckets, error) {
	data := tx.Bucket(bucketFeedData)
	if data == nil {
		return nil, corruptf("bucket %s missing", bucketFeedData)
	}
	root := data.Bucket(u64(id))
	if root == nil {
		return nil, nil
	}
	fb := &feedBuckets{
		root:  root,
		ids:   root.Bucket(bucketIDs),
		items: root.Bucket(bucketItems),
		pub:   root.Bucket(bucketPublished),
		obs:   root.Bucket(bucketObs),
	}
	if fb.ids == nil || fb.items == nil || fb.pub == nil || fb.obs == nil {
		return nil, corruptf("feed %d: data buckets missing", id)
	}
	// Items and observations are appended with increasing keys: full
	// pages split less.
	fb.items.FillPercent = 0.9
	fb.obs.FillPercent = 0.9
	return fb, nil
}

// createFeedBuckets creates the data buckets of a new feed.
func createFeedBuckets(tx *bolt.Tx, id uint64) error {
	data := tx.Bucket(bucketFeedData)
	if data == nil {
		return corruptf("bucket %s missing", bucketFeedData)
	}
	root, err := data.CreateBucket(u64(id))
	if err != nil {
		return err
	}
	for _, name := range [][]byte{bucketIDs, bucketItems, bucketPublished, bucketObs} {
		if _, err := root.CreateBucket(name); err != nil {
			return err
		}
	}
	return root.Put(keyCount, u64(0))
}
