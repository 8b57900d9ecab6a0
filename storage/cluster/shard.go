package cluster

import (
	"fmt"
	"hash/fnv"
	"regexp"
	"strconv"
)

// DefaultShards is the number of shards of a cluster whose first node
// gave none. It is fixed for the life of the cluster's lease bucket.
const DefaultShards = 64

// MaxShards bounds the shard count: every node watches and renews one KV
// key per shard it holds.
const MaxShards = 4096

// Kinds of work that are sharded.
const (
	KindFeed = "feed"
	KindPipe = "pipe"
)

// ShardOf returns the shard of the feed or pipe (kind KindFeed or
// KindPipe) with the given ID among shards shards: FNV-1a-64 of
// "<kind>/<id>" modulo shards. Every node computes the same shard for the
// same ID. shards must be positive.
func ShardOf(kind string, id uint64, shards int) int {
	h := fnv.New64a()
	h.Write([]byte(kind))
	h.Write([]byte{'/'})
	h.Write(strconv.AppendUint(nil, id, 10))
	return int(h.Sum64() % uint64(shards))
}

// nodeNameRE is what a node name may be: it is part of a KV key (and of a
// JetStream server name with --nats-embed), so it is a host-name-like
// token.
var nodeNameRE = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9_-]|\.[A-Za-z0-9_-]){0,62}$`)

// ValidNodeName reports whether name can name a node: 1 to 63 characters
// of letters, digits, '-', '_' and single '.' between them, starting with a
// letter or digit (a host name qualifies).
func ValidNodeName(name string) error {
	if !nodeNameRE.MatchString(name) {
		return fmt.Errorf("%w: node name %q (want letters, digits, '-', '_', '.'; at most 63)", ErrInvalid, name)
	}
	return nil
}
