package storage

import (
	"bytes"
	"encoding/binary"

	bolt "go.etcd.io/bbolt"
)

// Feed data. The items and observations of every feed share five
// top-level buckets, each key led by the feed's 8-byte ID, so that a
// feed's entries sit together in key order and many small feeds share a
// page: a feed costs no page of its own, and an empty one costs its count
// entry alone. Items, their publish-time index and observations are
// appended at the end of their feed's range, so their buckets split full
// pages (appendFill).

// appendFill is the FillPercent of the buckets whose entries are appended
// at the end of their feed's range: a split leaves the older entries in a
// full page and carries on in the new one.
const appendFill = 0.9

// view is one feed's range of a shared bucket: its keys are the feed's ID
// followed by the key a caller gives.
type view struct {
	b      *bolt.Bucket
	prefix [8]byte
}

func newView(b *bolt.Bucket, id uint64) view {
	v := view{b: b}
	binary.BigEndian.PutUint64(v.prefix[:], id)
	return v
}

// key is k in v's range: a new slice, which bbolt may keep until the
// transaction ends.
func (v view) key(k []byte) []byte {
	out := make([]byte, 0, 8+len(k))
	return append(append(out, v.prefix[:]...), k...)
}

// Get returns the value of k in v's range, nil when absent.
func (v view) Get(k []byte) []byte { return v.b.Get(v.key(k)) }

// Put stores k → val in v's range.
func (v view) Put(k, val []byte) error { return v.b.Put(v.key(k), val) }

// Delete removes k from v's range.
func (v view) Delete(k []byte) error { return v.b.Delete(v.key(k)) }

// ForEach calls fn on every key of v's range in order, the feed's ID
// stripped, until fn fails.
func (v view) ForEach(fn func(k, val []byte) error) error {
	c := v.Cursor()
	for k, val := c.First(); k != nil; k, val = c.Next() {
		if err := fn(k, val); err != nil {
			return err
		}
	}
	return nil
}

// Cursor returns a cursor over v's range.
func (v view) Cursor() *viewCursor { return &viewCursor{c: v.b.Cursor(), prefix: v.prefix} }

// viewCursor is a bbolt cursor kept inside one feed's range: it returns
// keys without the feed's ID, and a nil key at either end of the range.
type viewCursor struct {
	c      *bolt.Cursor
	prefix [8]byte
}

func (c *viewCursor) strip(k, v []byte) ([]byte, []byte) {
	if len(k) < 8 || !bytes.Equal(k[:8], c.prefix[:]) {
		return nil, nil
	}
	return k[8:], v
}

// First moves to the range's first key.
func (c *viewCursor) First() ([]byte, []byte) { return c.strip(c.c.Seek(c.prefix[:])) }

// Last moves to the range's last key.
func (c *viewCursor) Last() ([]byte, []byte) {
	id := binary.BigEndian.Uint64(c.prefix[:])
	if id == ^uint64(0) {
		return c.strip(c.c.Last())
	}
	if k, _ := c.c.Seek(u64(id + 1)); k == nil {
		return c.strip(c.c.Last())
	}
	return c.strip(c.c.Prev())
}

// Next moves to the next key. Past the range's end it returns nil and
// stays on the range's last key, as a bbolt cursor does at the end of its
// bucket.
func (c *viewCursor) Next() ([]byte, []byte) {
	bk, bv := c.c.Next()
	k, v := c.strip(bk, bv)
	if k == nil && bk != nil {
		c.c.Prev()
	}
	return k, v
}

// Prev moves to the previous key. Before the range's start it returns nil
// and stays on the range's first key, as a bbolt cursor does at the start
// of its bucket.
func (c *viewCursor) Prev() ([]byte, []byte) {
	bk, bv := c.c.Prev()
	k, v := c.strip(bk, bv)
	if k == nil && bk != nil {
		c.c.Next()
	}
	return k, v
}

// Seek moves to the first key of the range at or after k.
func (c *viewCursor) Seek(k []byte) ([]byte, []byte) {
	key := make([]byte, 0, 8+len(k))
	return c.strip(c.c.Seek(append(append(key, c.prefix[:]...), k...)))
}

// feedBuckets are one feed's items and observations: its ranges of the
// shared data buckets.
type feedBuckets struct {
	id     uint64
	counts *bolt.Bucket // item_count: feed ID → number of items
	ids    view         // item ID → Seq
	items  view         // Seq → item JSON
	pub    view         // pubKey → item ID
	obs    view         // observation sequence → observation JSON
}

// count returns the number of items the feed holds.
func (fb *feedBuckets) count() uint64 {
	n, _ := getU64(fb.counts.Get(u64(fb.id)))
	return n
}

// setCount stores the number of items the feed holds.
func (fb *feedBuckets) setCount(n uint64) error {
	return fb.counts.Put(u64(fb.id), u64(n))
}

// dataBucket returns one of the shared data buckets, which migrations
// guarantee.
func dataBucket(tx *bolt.Tx, name []byte) (*bolt.Bucket, error) {
	b := tx.Bucket(name)
	if b == nil {
		return nil, corruptf("bucket %s missing", name)
	}
	return b, nil
}

// openFeedBuckets returns the data of feed id, or nil when the feed has
// none (it does not exist): its count entry marks it.
func openFeedBuckets(tx *bolt.Tx, id uint64) (*feedBuckets, error) {
	var bs [5]*bolt.Bucket
	for i, name := range dataBuckets {
		b, err := dataBucket(tx, name)
		if err != nil {
			return nil, err
		}
		bs[i] = b
	}
	if bs[0].Get(u64(id)) == nil {
		return nil, nil
	}
	if tx.Writable() {
		for _, b := range []*bolt.Bucket{bs[2], bs[3], bs[4]} {
			b.FillPercent = appendFill
		}
	}
	return &feedBuckets{
		id:     id,
		counts: bs[0],
		ids:    newView(bs[1], id),
		items:  newView(bs[2], id),
		pub:    newView(bs[3], id),
		obs:    newView(bs[4], id),
	}, nil
}

// openFeedView returns feed id's range of the data bucket name alone (a
// poll that stores no item needs no other), or ErrFeedNotFound.
func openFeedView(tx *bolt.Tx, id uint64, name []byte) (view, error) {
	count, err := dataBucket(tx, bucketItemCount)
	if err != nil {
		return view{}, err
	}
	if count.Get(u64(id)) == nil {
		return view{}, ErrFeedNotFound
	}
	b, err := dataBucket(tx, name)
	if err != nil {
		return view{}, err
	}
	if tx.Writable() && !bytes.Equal(name, bucketItemIDs) {
		b.FillPercent = appendFill
	}
	return newView(b, id), nil
}

// createFeedBuckets starts the data of a new feed: its count entry.
func createFeedBuckets(tx *bolt.Tx, id uint64) error {
	count, err := dataBucket(tx, bucketItemCount)
	if err != nil {
		return err
	}
	return count.Put(u64(id), u64(0))
}

// deleteFeedData removes everything feed id holds in the data buckets.
func deleteFeedData(tx *bolt.Tx, id uint64) error {
	for _, name := range dataBuckets {
		b, err := dataBucket(tx, name)
		if err != nil {
			return err
		}
		if err := deleteRange(b, u64(id)); err != nil {
			return err
		}
	}
	return nil
}

// deleteRange removes the keys of b that begin with prefix.
func deleteRange(b *bolt.Bucket, prefix []byte) error {
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
		if err := b.Delete(bytes.Clone(k)); err != nil {
			return err
		}
	}
	return nil
}
