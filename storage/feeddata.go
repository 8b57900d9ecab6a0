package storage

import (
	"bytes"
	"encoding/binary"

	bolt "go.etcd.io/bbolt"
)

// Feed data. The items and observations of every feed share six
// top-level buckets, so that a feed costs no page of its own (an empty
// one costs its count entry alone) and many small feeds share a page.
//
// Item records are keyed by their Seq alone: Seq is store-wide and grows
// with every insert, so new items of all feeds are appended at the end of
// one bucket and fill its pages (itemsFill), and a poll writes no page of
// older items. A feed finds its items through its range of item_seq
// (feed ID | Seq, in arrival order), item_ids and item_pub. The keys of
// those and of item_count and obs begin with the feed's ID, so that a
// feed's entries sit together in key order: a poll appends at the end of
// its feed's range, which lies anywhere in the bucket, so these buckets
// split pages in halves as bbolt does by default.

// itemsFill is the FillPercent of the items bucket, appended at its end:
// a split leaves the page full.
const itemsFill = 1.0

// rangeFill is the FillPercent of the feed-keyed buckets that do not
// split pages in halves (bbolt's default). FillPercent belongs to an open
// bucket, not to the file: changing it changes no stored format, only how
// pages split from then on.
//
// A feed's item_pub entries arrive in publication order, at the end of
// its range, which outgrows a page (200 items take 8.8 KB): at 0.9 its
// leaves stay 72% full instead of 53%. A node of 1000 feeds at their
// retention (BenchmarkSteadyState: 200 items of 439 B as JSON and 500
// observations a feed) then has 129 KB in use a feed instead of 134 KB,
// 1.47 times the items' JSON bytes instead of 1.52, with CPU per poll
// (BenchmarkFleet, 2000 feeds at retention: 768 µs against 770, medians
// of alternating runs) and BenchmarkIngest unchanged within the noise.
// item_seq at 0.9 as well would give 1.44 times, but its medians showed
// 9% more CPU per poll (more splits, fuller leaves rewritten); item_ids
// keys do not arrive in order.
var rangeFill = map[string]float64{
	string(bucketObs):     0.9, // a feed's range outgrows a page: appended
	string(bucketItemPub): 0.9, // appended in publication order
}

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
func (v view) ForEach(fn func(k, val []byte) error) error { return forEach(v.Cursor(), fn) }

// forwardCursor is a cursor that walks forward: a viewCursor or an
// itemsCursor.
type forwardCursor interface {
	First() ([]byte, []byte)
	Next() ([]byte, []byte)
}

// forEach calls fn on every key of c from the first until fn fails.
func forEach[C forwardCursor](c C, fn func(k, val []byte) error) error {
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

// itemsView is one feed's items: its range of item_seq, whose keys (Seq)
// are those of the item records in the shared items bucket.
type itemsView struct {
	seqs view         // Seq → nothing
	all  *bolt.Bucket // Seq → item record, all feeds'
}

// Get returns the record of the item with Seq k.
func (v itemsView) Get(k []byte) []byte { return v.all.Get(k) }

// Put stores the record of the item with Seq k, new or not.
func (v itemsView) Put(k, val []byte) error {
	if err := v.all.Put(k, val); err != nil {
		return err
	}
	if v.seqs.Get(k) != nil {
		return nil
	}
	return v.seqs.Put(k, []byte{})
}

// Delete removes the item with Seq k.
func (v itemsView) Delete(k []byte) error {
	if err := v.all.Delete(k); err != nil {
		return err
	}
	return v.seqs.Delete(k)
}

// ForEach calls fn on the feed's items in arrival order (key Seq, value
// the record, nil when missing) until fn fails.
func (v itemsView) ForEach(fn func(k, val []byte) error) error { return forEach(v.Cursor(), fn) }

// Cursor returns a cursor over the feed's items in arrival order.
func (v itemsView) Cursor() *itemsCursor {
	return &itemsCursor{c: v.seqs.Cursor(), all: v.all.Cursor()}
}

// itemsCursor walks a feed's item_seq range and returns each Seq with its
// record, looked up with a cursor of its own (a Get would make one for
// every item).
type itemsCursor struct {
	c   *viewCursor
	all *bolt.Cursor
}

func (c *itemsCursor) record(k, _ []byte) ([]byte, []byte) {
	if k == nil {
		return nil, nil
	}
	if rk, v := c.all.Seek(k); bytes.Equal(rk, k) {
		return k, v
	}
	return k, nil
}

// First moves to the feed's first item.
func (c *itemsCursor) First() ([]byte, []byte) { return c.record(c.c.First()) }

// Last moves to the feed's last item.
func (c *itemsCursor) Last() ([]byte, []byte) { return c.record(c.c.Last()) }

// Next moves to the next item (see viewCursor.Next).
func (c *itemsCursor) Next() ([]byte, []byte) { return c.record(c.c.Next()) }

// Prev moves to the previous item (see viewCursor.Prev).
func (c *itemsCursor) Prev() ([]byte, []byte) { return c.record(c.c.Prev()) }

// Seek moves to the feed's first item with a Seq at or after k.
func (c *itemsCursor) Seek(k []byte) ([]byte, []byte) { return c.record(c.c.Seek(k)) }

// feedBuckets are one feed's items and observations: its ranges of the
// shared data buckets.
type feedBuckets struct {
	id     uint64
	counts *bolt.Bucket // item_count: feed ID → number of items
	items  itemsView    // Seq → item (itemenc.go)
	ids    view         // item ID → Seq
	pub    view         // pubKey → nothing
	obs    view         // observation sequence → observation (obsenc.go)
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
	bs := make(map[string]*bolt.Bucket, len(dataBuckets))
	for _, name := range dataBuckets {
		b, err := dataBucket(tx, name)
		if err != nil {
			return nil, err
		}
		bs[string(name)] = b
	}
	counts := bs[string(bucketItemCount)]
	if counts.Get(u64(id)) == nil {
		return nil, nil
	}
	all := bs[string(bucketItems)]
	if tx.Writable() {
		all.FillPercent = itemsFill
		for name, fill := range rangeFill {
			bs[name].FillPercent = fill
		}
	}
	return &feedBuckets{
		id:     id,
		counts: counts,
		items:  itemsView{seqs: newView(bs[string(bucketItemSeqs)], id), all: all},
		ids:    newView(bs[string(bucketItemIDs)], id),
		pub:    newView(bs[string(bucketItemPub)], id),
		obs:    newView(bs[string(bucketObs)], id),
	}, nil
}

// openFeedView returns feed id's range of the data bucket name (one of
// feedRanges) alone: a poll that stores no item needs no other. It fails
// with ErrFeedNotFound.
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
	if fill, ok := rangeFill[string(name)]; ok && tx.Writable() {
		b.FillPercent = fill
	}
	return newView(b, id), nil
}

// createFeedBuckets starts the data of a new feed: its count entry.
// Feed IDs only grow and a count never changes size, so the entries are
// appended and their pages, which every poll that stores items reads and
// rewrites, are left full (countFill).
func createFeedBuckets(tx *bolt.Tx, id uint64) error {
	count, err := dataBucket(tx, bucketItemCount)
	if err != nil {
		return err
	}
	count.FillPercent = countFill
	return count.Put(u64(id), u64(0))
}

// countFill is the FillPercent of the item_count bucket, appended at its
// end.
const countFill = 1.0

// deleteFeedData removes everything feed id holds in the data buckets.
func deleteFeedData(tx *bolt.Tx, id uint64) error {
	fb, err := openFeedBuckets(tx, id)
	if err != nil || fb == nil {
		return err
	}
	c := fb.items.seqs.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if err := fb.items.all.Delete(k); err != nil {
			return err
		}
	}
	for _, name := range feedRanges {
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
