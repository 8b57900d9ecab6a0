package storage

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Plugin records. Each plugin (a WebSub hub, a webhook sink, a WebAssembly
// operator store, …) keeps its own records in a namespace of its own: a
// nested bucket of plugin_data named after the plugin. Keys and values are
// the plugin's business; the store bounds their sizes and keeps every
// write atomic.

// Limits of plugin records.
const (
	MaxPluginName  = 64       // bytes in a plugin namespace name
	MaxPluginKey   = 1024     // bytes in a key
	MaxPluginValue = 16 << 20 // bytes in a value (a WebAssembly module fits)
)

func checkPluginName(plugin string) error {
	if plugin == "" || len(plugin) > MaxPluginName {
		return invalidf("plugin name %q: want 1 to %d bytes", shortID(plugin), MaxPluginName)
	}
	return nil
}

func checkPluginKey(key string) error {
	if key == "" || len(key) > MaxPluginKey {
		return invalidf("plugin key %q: want 1 to %d bytes", shortID(key), MaxPluginKey)
	}
	return nil
}

// ValidatePluginRecord returns an error wrapping ErrInvalid when PluginPut
// of this record must be refused: every backend refuses the same records.
func ValidatePluginRecord(plugin, key string, value []byte) error {
	if err := checkPluginName(plugin); err != nil {
		return err
	}
	if err := checkPluginKey(key); err != nil {
		return err
	}
	if len(value) > MaxPluginValue {
		return invalidf("plugin %s: record %q is %d bytes, the limit is %d", plugin, shortID(key), len(value), MaxPluginValue)
	}
	return nil
}

// PluginPut stores value under key in plugin's namespace, replacing what
// was there.
func (s *Store) PluginPut(plugin, key string, value []byte) error {
	if err := ValidatePluginRecord(plugin, key, value); err != nil {
		return err
	}
	err := s.dbUpdate(func(tx *bolt.Tx) error {
		b, err := writablePluginBucket(tx, plugin)
		if err != nil {
			return err
		}
		return b.Put([]byte(key), value)
	})
	if err != nil {
		return fmt.Errorf("storage: plugin %s: put %q: %w", plugin, shortID(key), err)
	}
	return nil
}

// PluginCreate stores value under key in plugin's namespace unless the key
// holds a value already, and returns what the key holds after the call:
// value when it was stored, else the value found, which it leaves alone.
func (s *Store) PluginCreate(plugin, key string, value []byte) ([]byte, error) {
	if err := ValidatePluginRecord(plugin, key, value); err != nil {
		return nil, err
	}
	var out []byte
	err := s.dbUpdate(func(tx *bolt.Tx) error {
		b, err := writablePluginBucket(tx, plugin)
		if err != nil {
			return err
		}
		if v := b.Get([]byte(key)); v != nil {
			out = append([]byte(nil), v...)
			return nil
		}
		out = append([]byte(nil), value...)
		return b.Put([]byte(key), value)
	})
	if err != nil {
		return nil, fmt.Errorf("storage: plugin %s: create %q: %w", plugin, shortID(key), err)
	}
	return out, nil
}

// PluginOp is one write of a PluginApply batch: Value stored under Key,
// replacing what was there, or with Delete, Key removed (a missing key is
// not an error).
type PluginOp struct {
	Key    string
	Value  []byte
	Delete bool
}

// ValidatePluginOps returns an error wrapping ErrInvalid when PluginApply
// of this batch must be refused: the plugin name, or any write's key or
// value, is refused as ValidatePluginRecord refuses them (a delete's key
// too). Nothing of a refused batch is written.
func ValidatePluginOps(plugin string, ops []PluginOp) error {
	if err := checkPluginName(plugin); err != nil {
		return err
	}
	for i, op := range ops {
		value := op.Value
		if op.Delete {
			value = nil // not written
		}
		if err := ValidatePluginRecord(plugin, op.Key, value); err != nil {
			return fmt.Errorf("write %d of %d: %w", i+1, len(ops), err)
		}
	}
	return nil
}

// PluginApply makes the writes ops in plugin's namespace, in order (a
// later write of the same key wins), in one transaction: all of them or,
// with an error, none. It costs one commit, with its fsync, however many
// records it writes: the webhook sink stores the deliveries of a feed's
// new items for all its hooks with one (BenchmarkNotify in
// plugins/webhook, docs/benchmarks.md).
func (s *Store) PluginApply(plugin string, ops []PluginOp) error {
	if err := ValidatePluginOps(plugin, ops); err != nil {
		return fmt.Errorf("storage: plugin %s: apply: %w", shortID(plugin), err)
	}
	if len(ops) == 0 {
		return nil
	}
	err := s.dbUpdate(func(tx *bolt.Tx) error {
		root := tx.Bucket(bucketPluginData)
		if root == nil {
			return corruptf("bucket %s missing", bucketPluginData)
		}
		b := root.Bucket([]byte(plugin))
		for _, op := range ops {
			if op.Delete {
				if b == nil {
					continue // nothing stored: nothing to delete
				}
				if err := b.Delete([]byte(op.Key)); err != nil {
					return fmt.Errorf("delete %q: %w", shortID(op.Key), err)
				}
				continue
			}
			if b == nil {
				var err error
				if b, err = root.CreateBucket([]byte(plugin)); err != nil {
					return err
				}
			}
			if err := b.Put([]byte(op.Key), op.Value); err != nil {
				return fmt.Errorf("put %q: %w", shortID(op.Key), err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("storage: plugin %s: apply %d writes: %w", plugin, len(ops), err)
	}
	return nil
}

// PluginGet returns a copy of the value under key in plugin's namespace,
// or ErrPluginKeyNotFound.
func (s *Store) PluginGet(plugin, key string) ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		b := pluginBucket(tx, plugin)
		if b == nil {
			return ErrPluginKeyNotFound
		}
		v := b.Get([]byte(key))
		if v == nil {
			return ErrPluginKeyNotFound
		}
		out = append([]byte(nil), v...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("storage: plugin %s: get %q: %w", plugin, shortID(key), err)
	}
	return out, nil
}

// PluginDelete removes key from plugin's namespace; a missing key is not
// an error.
func (s *Store) PluginDelete(plugin, key string) error {
	err := s.dbUpdate(func(tx *bolt.Tx) error {
		b := pluginBucket(tx, plugin)
		if b == nil {
			return nil
		}
		return b.Delete([]byte(key))
	})
	if err != nil {
		return fmt.Errorf("storage: plugin %s: delete %q: %w", plugin, shortID(key), err)
	}
	return nil
}

// PluginList calls fn for every record in plugin's namespace, in key
// order, inside one read transaction. value is valid only during the call
// (copy it to keep it). An error from fn stops the walk and is returned.
func (s *Store) PluginList(plugin string, fn func(key string, value []byte) error) error {
	err := s.db.View(func(tx *bolt.Tx) error {
		b := pluginBucket(tx, plugin)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				return nil // a nested bucket: not a record
			}
			return fn(string(k), v)
		})
	})
	if err != nil {
		return fmt.Errorf("storage: plugin %s: list: %w", plugin, err)
	}
	return nil
}

// writablePluginBucket returns plugin's bucket in the write transaction
// tx, created if it is missing.
func writablePluginBucket(tx *bolt.Tx, plugin string) (*bolt.Bucket, error) {
	root := tx.Bucket(bucketPluginData)
	if root == nil {
		return nil, corruptf("bucket %s missing", bucketPluginData)
	}
	return root.CreateBucketIfNotExists([]byte(plugin))
}

func pluginBucket(tx *bolt.Tx, plugin string) *bolt.Bucket {
	root := tx.Bucket(bucketPluginData)
	if root == nil {
		return nil
	}
	return root.Bucket([]byte(plugin))
}
