package cluster

import "errors"

// Errors of the cluster package. Callers branch on them with errors.Is.
var (
	// ErrInvalid: an option or name is out of bounds.
	ErrInvalid = errors.New("cluster: invalid")
	// ErrConfigMismatch: the lease bucket was set up by nodes with another
	// shard count; joining would put a feed in two shards.
	ErrConfigMismatch = errors.New("cluster: shard count differs from the cluster's")
	// ErrDuplicateNode: another running process writes the member key of
	// this node's name. The node stops acting on any shard.
	ErrDuplicateNode = errors.New("cluster: another process runs with this node name")
	// ErrClosed: the node was closed.
	ErrClosed = errors.New("cluster: node closed")
)
