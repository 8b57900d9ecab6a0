package jetstream

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/slogfeed/slogfeed/storage"
)

// Plugin records live in PluginsBucket under <b64(plugin)>.<b64(key)>,
// base64url without padding, so any plugin name and key make a valid KV
// key. Records are refused exactly as the bbolt store refuses them
// (storage.ValidatePluginRecord), and besides when a value does not fit
// one NATS message (the server's max_payload, 1 MiB by default, less a
// margin): storage.ErrInvalid either way.

var b64 = base64.RawURLEncoding

func pluginPrefix(plugin string) string { return b64.EncodeToString([]byte(plugin)) + "." }

func pluginKey(plugin, key string) string {
	return pluginPrefix(plugin) + b64.EncodeToString([]byte(key))
}

// PluginPut stores value under key in plugin's namespace, replacing what
// was there.
func (s *Store) PluginPut(ctx context.Context, plugin, key string, value []byte) error {
	if err := storage.ValidatePluginRecord(plugin, key, value); err != nil {
		return err
	}
	if len(value) > s.maxData {
		return fmt.Errorf("plugin %s: record of %d bytes: %w: more than one NATS message holds (%d)", plugin, len(value), storage.ErrInvalid, s.maxData)
	}
	_, err := s.plugins.Put(ctx, pluginKey(plugin, key), value)
	if err := s.opt.Metrics.kvWrite(PluginsBucket, err); err != nil {
		return fmt.Errorf("plugin %s: put: %w", plugin, err)
	}
	return nil
}

// PluginApply makes the writes ops in plugin's namespace, in order, one
// KV put or delete each: the bucket has no transaction over several keys.
// The whole batch is checked first (storage.ValidatePluginOps and the
// NATS message size), so a refused batch writes nothing; a write that
// fails stops the batch, leaving the writes before it done and those
// after it undone. A caller orders its writes so that any such prefix is
// a state it can read back.
func (s *Store) PluginApply(ctx context.Context, plugin string, ops []storage.PluginOp) error {
	if err := storage.ValidatePluginOps(plugin, ops); err != nil {
		return err
	}
	for i, op := range ops {
		if !op.Delete && len(op.Value) > s.maxData {
			return fmt.Errorf("plugin %s: write %d of %d: record of %d bytes: %w: more than one NATS message holds (%d)", plugin, i+1, len(ops), len(op.Value), storage.ErrInvalid, s.maxData)
		}
	}
	for i, op := range ops {
		var err error
		if op.Delete {
			err = s.plugins.Delete(ctx, pluginKey(plugin, op.Key))
		} else {
			_, err = s.plugins.Put(ctx, pluginKey(plugin, op.Key), op.Value)
		}
		if err := s.opt.Metrics.kvWrite(PluginsBucket, err); err != nil {
			return fmt.Errorf("plugin %s: write %d of %d: %w", plugin, i+1, len(ops), err)
		}
	}
	return nil
}

// PluginCreate stores value under key in plugin's namespace unless the key
// holds a value already (a KV create, which the bucket's leader orders),
// and returns what the key holds after the call: value when it was
// stored, else the value found.
func (s *Store) PluginCreate(ctx context.Context, plugin, key string, value []byte) ([]byte, error) {
	if err := storage.ValidatePluginRecord(plugin, key, value); err != nil {
		return nil, err
	}
	if len(value) > s.maxData {
		return nil, fmt.Errorf("plugin %s: record of %d bytes: %w: more than one NATS message holds (%d)", plugin, len(value), storage.ErrInvalid, s.maxData)
	}
	k := pluginKey(plugin, key)
	for range maxRetries {
		_, err := s.plugins.Create(ctx, k, value)
		if !errors.Is(err, jetstream.ErrKeyExists) {
			if err := s.opt.Metrics.kvWrite(PluginsBucket, err); err != nil {
				return nil, fmt.Errorf("plugin %s: create: %w", plugin, err)
			}
			return value, nil
		}
		// Another writer created it: its value is read from the bucket
		// stream's leader, which holds every acknowledged write (a
		// replica that answered a direct get may not have it yet).
		e, err := s.leaderGet(ctx, PluginsBucket, k)
		if err != nil {
			return nil, fmt.Errorf("plugin %s: create: %w", plugin, err)
		}
		if e != nil {
			return e.Value(), nil
		}
		// Deleted since: try the create again.
	}
	return nil, fmt.Errorf("plugin %s: create: %w", plugin, ErrStale)
}

// PluginGet returns the value under key in plugin's namespace, or
// storage.ErrPluginKeyNotFound.
func (s *Store) PluginGet(ctx context.Context, plugin, key string) ([]byte, error) {
	if storage.ValidatePluginRecord(plugin, key, nil) != nil {
		return nil, fmt.Errorf("plugin %s: get: %w", plugin, storage.ErrPluginKeyNotFound)
	}
	e, err := s.plugins.Get(ctx, pluginKey(plugin, key))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("plugin %s: get: %w", plugin, storage.ErrPluginKeyNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("plugin %s: get: %w", plugin, err)
	}
	return e.Value(), nil
}

// PluginDelete removes key from plugin's namespace; a missing key is not
// an error.
func (s *Store) PluginDelete(ctx context.Context, plugin, key string) error {
	if storage.ValidatePluginRecord(plugin, key, nil) != nil {
		return nil // such a record cannot have been stored
	}
	if err := s.opt.Metrics.kvWrite(PluginsBucket, s.plugins.Delete(ctx, pluginKey(plugin, key))); err != nil {
		return fmt.Errorf("plugin %s: delete: %w", plugin, err)
	}
	return nil
}

// PluginList calls fn for every record in plugin's namespace, in key
// order. Unlike the bbolt store's one read transaction, it lists the keys
// (from the bucket stream's leader, see keysFromLeader) and then reads
// each: a record deleted meanwhile is left out. An error
// from fn stops the walk and is returned.
func (s *Store) PluginList(ctx context.Context, plugin string, fn func(key string, value []byte) error) error {
	if storage.ValidatePluginRecord(plugin, "k", nil) != nil {
		return nil
	}
	prefix := pluginPrefix(plugin)
	keys, err := s.keysFromLeader(ctx, PluginsBucket, prefix)
	if err != nil {
		return fmt.Errorf("plugin %s: list: %w", plugin, err)
	}
	type rec struct{ key, kv string }
	var recs []rec
	for _, k := range keys {
		dec, err := b64.DecodeString(k)
		if err != nil {
			return fmt.Errorf("plugin %s: list: %w: key %q", plugin, storage.ErrCorrupt, k)
		}
		recs = append(recs, rec{string(dec), prefix + k})
	}
	slices.SortFunc(recs, func(a, b rec) int { return cmp.Compare(a.key, b.key) })
	for _, r := range recs {
		e, err := s.plugins.Get(ctx, r.kv)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return fmt.Errorf("plugin %s: list: %w", plugin, err)
		}
		if err := fn(r.key, e.Value()); err != nil {
			return err
		}
	}
	return nil
}

// PluginPut is Store.PluginPut.
func (b *Backend) PluginPut(plugin, key string, value []byte) error {
	ctx, cancel := b.call()
	defer cancel()
	return b.s.PluginPut(ctx, plugin, key, value)
}

// PluginCreate is Store.PluginCreate.
func (b *Backend) PluginCreate(plugin, key string, value []byte) ([]byte, error) {
	ctx, cancel := b.call()
	defer cancel()
	return b.s.PluginCreate(ctx, plugin, key, value)
}

// PluginApply is Store.PluginApply, the whole batch within one call's
// timeout.
func (b *Backend) PluginApply(plugin string, ops []storage.PluginOp) error {
	ctx, cancel := b.call()
	defer cancel()
	return b.s.PluginApply(ctx, plugin, ops)
}

// PluginGet is Store.PluginGet.
func (b *Backend) PluginGet(plugin, key string) ([]byte, error) {
	ctx, cancel := b.call()
	defer cancel()
	return b.s.PluginGet(ctx, plugin, key)
}

// PluginDelete is Store.PluginDelete.
func (b *Backend) PluginDelete(plugin, key string) error {
	ctx, cancel := b.call()
	defer cancel()
	return b.s.PluginDelete(ctx, plugin, key)
}

// PluginList is Store.PluginList.
func (b *Backend) PluginList(plugin string, fn func(key string, value []byte) error) error {
	ctx, cancel := b.call()
	defer cancel()
	return b.s.PluginList(ctx, plugin, fn)
}
