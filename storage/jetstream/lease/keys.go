package lease

import (
	"fmt"
	"strconv"
)

// Key names in the lease bucket.
const (
	configKey  = "config"
	nodePrefix = "node."
	shardPref  = "shard."
)

func shardKey(s int) string { return fmt.Sprintf("%s%04d", shardPref, s) }

// parseShardKey returns the shard of a "shard.NNNN" key, or -1.
func parseShardKey(k string, shards int) int {
	if len(k) <= len(shardPref) || k[:len(shardPref)] != shardPref {
		return -1
	}
	n, err := strconv.Atoi(k[len(shardPref):])
	if err != nil || n < 0 || n >= shards {
		return -1
	}
	return n
}
