package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// migration brings the data file from schema version-1 to version, in
// one transaction (fn) or in several (batch).
type migration struct {
	version uint64
	name    string
	fn      func(tx *bolt.Tx) error
	// batch, when set instead of fn, converts a bounded part of the file
	// at each call and reports done when nothing is left. migrate calls it
	// in one transaction after another, each storing the new version and
	// keyMigrating (the version still under way) until it is done, so that
	// a large file is converted without holding it all in one
	// transaction, an interrupted conversion resumes where it stopped, and
	// an older slogfeed refuses the file meanwhile (ErrSchemaTooNew).
	batch func(tx *bolt.Tx) (done bool, err error)
}

// keyMigrating, in meta, holds the version of a batched migration under
// way (absent when none is).
var keyMigrating = []byte("migrating")

// migrations is the ordered list of schema migrations. Append new ones at
// the end with the next version number (and raise SchemaVersion); never
// edit or remove a released one.
var migrations = []migration{
	{1, "initial layout: meta, feeds, feed_url, feed_slug, feed_data", migrateInitial, nil},
	{2, "pipes: pipes, pipe_slug", migratePipes, nil},
	{3, "plugin data: plugin_data", migratePluginData, nil},
	{4, "observation tails in feeds", migrateObsTails, nil},
	{5, "policy states in feeds", migratePolicyStates, nil},
	{6, "items and observations of all feeds in shared buckets", nil, migrateSharedFeedData},
	{7, "observations in a binary form", nil, migrateBinaryObservations},
	{8, "items in a binary form", nil, migrateBinaryItems},
	{9, "dropped item IDs in feeds", migrateDroppedIDs, nil},
}

// SchemaVersion is the schema version this build of slogfeed writes: the
// version of the last migration.
const SchemaVersion = 9

// The layout of feed data up to schema 5: a bucket feed_data holding one
// bucket per feed (its ID), which held the count and four buckets.
var (
	legacyFeedData  = []byte("feed_data")
	legacyCount     = []byte("count")
	legacyIDs       = []byte("ids")
	legacyItems     = []byte("items")
	legacyPublished = []byte("published")
	legacyObs       = []byte("obs")
)

func migrateInitial(tx *bolt.Tx) error {
	for _, name := range [][]byte{bucketMeta, bucketFeeds, bucketFeedURL, bucketFeedSlug, legacyFeedData} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return err
		}
	}
	return nil
}

// migratePipes adds the buckets of stored pipes (schema 2).
func migratePipes(tx *bolt.Tx) error {
	for _, name := range [][]byte{bucketPipes, bucketPipeSlug} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return err
		}
	}
	return nil
}

// checkMigrations reports a migration table that is not strictly
// increasing from 1.
func checkMigrations(migs []migration) error {
	for i, m := range migs {
		if m.version != uint64(i+1) || (m.fn == nil) == (m.batch == nil) {
			return fmt.Errorf("storage: migration table: entry %d (%q) has version %d, want %d", i, m.name, m.version, i+1)
		}
	}
	return nil
}

// schemaVersion reads the stored schema version; 0 means a new file.
func schemaVersion(tx *bolt.Tx) (uint64, error) {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return 0, nil
	}
	raw := meta.Get(keySchema)
	if raw == nil {
		return 0, nil
	}
	v, ok := getU64(raw)
	if !ok {
		return 0, corruptf("schema version is %d bytes, want 8", len(raw))
	}
	return v, nil
}

// migrate applies the migrations above the stored schema version, each in
// its own transaction together with the new version number, so a failure
// leaves the file at the last version that succeeded.
func migrate(db *bolt.DB, migs []migration) error {
	if err := checkMigrations(migs); err != nil {
		return err
	}
	var latest uint64
	if len(migs) > 0 {
		latest = migs[len(migs)-1].version
	}
	var current, pending uint64
	if err := db.View(func(tx *bolt.Tx) error {
		var err error
		if current, err = schemaVersion(tx); err != nil {
			return err
		}
		if meta := tx.Bucket(bucketMeta); meta != nil {
			if raw := meta.Get(keyMigrating); raw != nil {
				var ok bool
				if pending, ok = getU64(raw); !ok || pending != current {
					return corruptf("migration under way is %x, schema version %d", raw, current)
				}
			}
		}
		return nil
	}); err != nil {
		return err
	}
	if current > latest {
		return fmt.Errorf("storage: %s has schema version %d, this slogfeed knows up to %d: %w",
			db.Path(), current, latest, ErrSchemaTooNew)
	}
	for _, m := range migs {
		if m.version < current || m.version == current && pending != m.version {
			continue
		}
		if m.batch != nil {
			if err := migrateBatches(db, m); err != nil {
				return err
			}
			continue
		}
		err := db.Update(func(tx *bolt.Tx) error {
			if err := m.fn(tx); err != nil {
				return err
			}
			meta, err := tx.CreateBucketIfNotExists(bucketMeta)
			if err != nil {
				return err
			}
			return meta.Put(keySchema, u64(m.version))
		})
		if err != nil {
			return fmt.Errorf("storage: migration %d (%s): %w", m.version, m.name, err)
		}
	}
	return nil
}

// migratePluginData adds the bucket plugins keep their records in
// (schema 3).
func migratePluginData(tx *bolt.Tx) error {
	_, err := tx.CreateBucketIfNotExists(bucketPluginData)
	return err
}

// migrateObsTails marks schema 4: a feed's newest observations may sit in
// the feeds bucket beside its record (obstail.go). There is nothing to
// convert; the version keeps a slogfeed of schema 3, which would read a
// tail as a broken feed record, from opening the file.
func migrateObsTails(*bolt.Tx) error { return nil }

// migratePolicyStates marks schema 5: a remote feed's policy state may
// sit in the feeds bucket beside its record (policystate.go). There is
// nothing to convert (a feed without one is rebuilt by replay); the
// version keeps a slogfeed of schema 4, which would write observations
// without folding them into the states, from opening the file.
func migratePolicyStates(*bolt.Tx) error { return nil }

// migrateDroppedIDs marks the files whose feeds bucket may hold the sets
// of item IDs retention dropped (dropped.go), under keys an older
// slogfeed does not know (schema 9): there is nothing to convert.
func migrateDroppedIDs(*bolt.Tx) error { return nil }

// migrateBatches runs batched migration m to its end (see migration).
func migrateBatches(db *bolt.DB, m migration) error {
	for done := false; !done; {
		err := db.Update(func(tx *bolt.Tx) error {
			var err error
			if done, err = m.batch(tx); err != nil {
				return err
			}
			meta, err := tx.CreateBucketIfNotExists(bucketMeta)
			if err != nil {
				return err
			}
			if err := meta.Put(keySchema, u64(m.version)); err != nil {
				return err
			}
			if done {
				return meta.Delete(keyMigrating)
			}
			return meta.Put(keyMigrating, u64(m.version))
		})
		if err != nil {
			return fmt.Errorf("storage: migration %d (%s): %w", m.version, m.name, err)
		}
	}
	return nil
}

// migrateBatchEntries is about how many entries migrateSharedFeedData
// moves in one transaction (a feed is always moved whole).
var migrateBatchEntries = 50_000

// migrateSharedFeedData moves the items and observations of schema 5's
// per-feed buckets (feed_data/<feed ID>/…) to the shared buckets of
// schema 6, a batch of feeds at a time, in order of feed ID, deleting
// each feed's old bucket in the transaction that moves it; the last batch
// deletes feed_data. Keys, values and the count are kept as they are,
// each key led by the feed's ID, but for the item records (keyed by Seq,
// and listed in item_seq) and the published index (no item ID: the
// record has it).
func migrateSharedFeedData(tx *bolt.Tx) (done bool, err error) {
	dst := make(map[string]*bolt.Bucket, len(dataBuckets))
	for _, name := range dataBuckets {
		b, err := tx.CreateBucketIfNotExists(name)
		if err != nil {
			return false, err
		}
		// Moved in order of feed ID: every bucket but the items' is
		// appended to at its end.
		if !bytes.Equal(name, bucketItems) {
			b.FillPercent = itemsFill
		}
		dst[string(name)] = b
	}
	data := tx.Bucket(legacyFeedData)
	if data == nil {
		return true, nil
	}
	var moved [][]byte
	entries := 0
	c := data.Cursor()
	for k, v := c.First(); k != nil && entries < migrateBatchEntries; k, v = c.Next() {
		id, ok := getU64(k)
		root := data.Bucket(k)
		if !ok || v != nil || root == nil {
			return false, corruptf("%s[%x] is not a feed's data bucket", legacyFeedData, k)
		}
		n, err := moveFeedData(root, id, dst)
		if err != nil {
			return false, fmt.Errorf("feed %d: %w", id, err)
		}
		entries += n
		moved = append(moved, append([]byte(nil), k...))
	}
	for _, k := range moved {
		if err := data.DeleteBucket(k); err != nil {
			return false, err
		}
	}
	if k, _ := data.Cursor().First(); k != nil {
		return false, nil
	}
	return true, tx.DeleteBucket(legacyFeedData)
}

// moveFeedData copies one schema-5 feed data bucket to the shared
// buckets dst and returns how many entries it copied.
func moveFeedData(root *bolt.Bucket, id uint64, dst map[string]*bolt.Bucket) (int, error) {
	n := 0
	items := itemsView{seqs: newView(dst[string(bucketItemSeqs)], id), all: dst[string(bucketItems)]}
	for _, m := range []struct {
		from []byte
		to   interface{ Put(k, v []byte) error }
	}{
		{legacyIDs, newView(dst[string(bucketItemIDs)], id)}, {legacyItems, items},
		{legacyPublished, emptyValues{newView(dst[string(bucketItemPub)], id)}}, {legacyObs, newView(dst[string(bucketObs)], id)},
	} {
		src := root.Bucket(m.from)
		if src == nil {
			continue // a feed written before the bucket existed has none
		}
		err := src.ForEach(func(k, v []byte) error {
			if v == nil {
				return corruptf("%s/%d/%s[%x] is a bucket", legacyFeedData, id, m.from, k)
			}
			n++
			return m.to.Put(bytes.Clone(k), bytes.Clone(v))
		})
		if err != nil {
			return 0, err
		}
	}
	count := root.Get(legacyCount)
	if _, ok := getU64(count); !ok {
		return 0, corruptf("%s/%d: item count %x", legacyFeedData, id, count)
	}
	return n, dst[string(bucketItemCount)].Put(u64(id), bytes.Clone(count))
}

// emptyValues puts its keys with empty values: the published index of
// schema 6 holds no item ID (the record has it).
type emptyValues struct{ v view }

func (e emptyValues) Put(k, _ []byte) error { return e.v.Put(k, []byte{}) }

// keyMigrateFrom, in meta, is the ID of the first feed whose observations
// migrateBinaryObservations has still to convert (absent when it has not
// begun or is done).
var keyMigrateFrom = []byte("migrate_from")

// migrateBinaryObservations rewrites the observations of schema 6, JSON,
// in the binary form of schema 7 (obsenc.go): each feed's observation
// tail and its range of the obs bucket, a batch of feeds at a time
// (about migrateBatchEntries observations), in order of feed ID from
// meta/migrate_from. A value that is already binary, or that does not
// decode (Check reports a broken tail), is left as it is.
func migrateBinaryObservations(tx *bolt.Tx) (done bool, err error) {
	meta, err := bucket(tx, bucketMeta)
	if err != nil {
		return false, err
	}
	var from uint64
	if raw := meta.Get(keyMigrateFrom); raw != nil {
		var ok bool
		if from, ok = getU64(raw); !ok {
			return false, corruptf("%s/%s is %x", bucketMeta, keyMigrateFrom, raw)
		}
	}
	feeds, err := bucket(tx, bucketFeeds)
	if err != nil {
		return false, err
	}
	obs, err := dataBucket(tx, bucketObs)
	if err != nil {
		return false, err
	}
	// The new values are put once the cursors are done with the pages.
	type put struct {
		b    *bolt.Bucket
		k, v []byte
	}
	var puts []put
	entries := 0
	c := feeds.Cursor()
	k, _ := c.Seek(u64(from))
	for ; k != nil; k, _ = c.Next() {
		if !isFeedKey(k) {
			continue // a tail or a policy state, seen with its feed
		}
		if entries >= migrateBatchEntries {
			break
		}
		id, _ := getU64(k)
		tk := tailKey(id)
		if tail := feeds.Get(tk); tail != nil {
			if v, n, ok := binaryTail(tail); ok && n > 0 {
				puts = append(puts, put{feeds, tk, v})
				entries += n
			}
		}
		feedObs := newView(obs, id)
		oc := feedObs.Cursor()
		for seq, v := oc.First(); seq != nil; seq, v = oc.Next() {
			if b, ok := binaryObservation(v); ok {
				puts = append(puts, put{obs, feedObs.key(seq), b})
			}
			entries++
		}
	}
	next := bytes.Clone(k) // before the writes: k is in a page they may change
	for _, p := range puts {
		// Deleted first: bbolt merges the pages a delete leaves under a
		// quarter full, not those a smaller value leaves so.
		if err := p.b.Delete(p.k); err != nil {
			return false, err
		}
		if err := p.b.Put(p.k, p.v); err != nil {
			return false, err
		}
	}
	if next == nil {
		return true, meta.Delete(keyMigrateFrom)
	}
	return false, meta.Put(keyMigrateFrom, next)
}

// binaryObservation returns the binary form of a JSON observation; false
// when v is not JSON or does not convert.
func binaryObservation(v []byte) ([]byte, bool) {
	if len(v) == 0 || v[0] == obsTag {
		return nil, false
	}
	o, err := decodeObservation(v)
	if err != nil {
		return nil, false
	}
	b, err := appendObservation(nil, &o)
	return b, err == nil
}

// binaryTail returns an observation tail with its JSON entries converted
// and how many it converted; false when the tail does not split.
func binaryTail(tail []byte) ([]byte, int, bool) {
	entries, err := tailEntries(tail)
	if err != nil {
		return nil, 0, false
	}
	out := make([]byte, 0, len(tail))
	n := 0
	for _, e := range entries {
		if b, ok := binaryObservation(e); ok {
			e = b
			n++
		}
		out = binary.AppendUvarint(out, uint64(len(e)))
		out = append(out, e...)
	}
	return out, n, true
}

// legacyItemsJSON holds the items bucket of schema 7 (its JSON records)
// while migrateBinaryItems converts it: absent before and after.
var legacyItemsJSON = []byte("items_json")

// migrateBinaryItems rewrites the item records of schema 7, JSON, in the
// binary form of schema 8 (itemenc.go). Its first batch moves the items
// bucket, as it is, into legacyItemsJSON and creates an empty one; each
// batch then moves the first migrateBatchEntries records of the old
// bucket, converted, to the new one, in order of Seq, so that the new
// bucket's pages are filled as appends fill them (a conversion in place
// would leave them about half full) and the old bucket's emptied pages
// are freed as it goes; where to resume is the old bucket's first key.
// The last batch deletes legacyItemsJSON. A record that is already
// binary, or that does not decode (Check reports it), is moved as it is.
func migrateBinaryItems(tx *bolt.Tx) (done bool, err error) {
	holder := tx.Bucket(legacyItemsJSON)
	if holder == nil {
		if holder, err = tx.CreateBucket(legacyItemsJSON); err != nil {
			return false, err
		}
		if tx.Bucket(bucketItems) != nil {
			if err := tx.MoveBucket(bucketItems, nil, holder); err != nil {
				return false, err
			}
		} else if _, err := holder.CreateBucket(bucketItems); err != nil {
			return false, err
		}
		if _, err := tx.CreateBucket(bucketItems); err != nil {
			return false, err
		}
	}
	old := holder.Bucket(bucketItems)
	if old == nil {
		return false, corruptf("%s/%s missing", legacyItemsJSON, bucketItems)
	}
	items, err := bucket(tx, bucketItems)
	if err != nil {
		return false, err
	}
	items.FillPercent = itemsFill
	var moved [][]byte
	c := old.Cursor()
	for k, v := c.First(); k != nil && len(moved) < migrateBatchEntries; k, v = c.Next() {
		seq, ok := getU64(k)
		if !ok || v == nil {
			return false, corruptf("%s[%x] is not an item record", bucketItems, k)
		}
		k = bytes.Clone(k)
		if err := items.Put(k, binaryItem(seq, v)); err != nil {
			return false, err
		}
		moved = append(moved, k)
	}
	for _, k := range moved {
		if err := old.Delete(k); err != nil {
			return false, err
		}
	}
	if k, _ := old.Cursor().First(); k != nil {
		return false, nil
	}
	return true, tx.DeleteBucket(legacyItemsJSON)
}

// binaryItem returns the binary form of the JSON item record v stored
// under seq, or a copy of v when it is not JSON or does not convert.
func binaryItem(seq uint64, v []byte) []byte {
	if len(v) > 0 && v[0] != itemTag {
		if it, err := decodeItem(seq, v); err == nil {
			if b, err := appendItem(make([]byte, 0, len(v)/2), &it); err == nil {
				return b
			}
		}
	}
	return bytes.Clone(v)
}
