package storage

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// migration brings the data file from schema version-1 to version.
type migration struct {
	version uint64
	name    string
	fn      func(tx *bolt.Tx) error
}

// migrations is the ordered list of schema migrations. Append new ones at
// the end with the next version number (and raise SchemaVersion); never
// edit or remove a released one.
var migrations = []migration{
	{1, "initial layout: meta, feeds, feed_url, feed_slug, feed_data", migrateInitial},
	{2, "pipes: pipes, pipe_slug", migratePipes},
	{3, "plugin data: plugin_data", migratePluginData},
	{4, "observation tails in feeds", migrateObsTails},
	{5, "policy states in feeds", migratePolicyStates},
}

// SchemaVersion is the schema version this build of slogfeed writes: the
// version of the last migration.
const SchemaVersion = 5

func migrateInitial(tx *bolt.Tx) error {
	for _, name := range [][]byte{bucketMeta, bucketFeeds, bucketFeedURL, bucketFeedSlug, bucketFeedData} {
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
		if m.version != uint64(i+1) || m.fn == nil {
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
	var current uint64
	if err := db.View(func(tx *bolt.Tx) error {
		var err error
		current, err = schemaVersion(tx)
		return err
	}); err != nil {
		return err
	}
	if current > latest {
		return fmt.Errorf("storage: %s has schema version %d, this slogfeed knows up to %d: %w",
			db.Path(), current, latest, ErrSchemaTooNew)
	}
	for _, m := range migs {
		if m.version <= current {
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
