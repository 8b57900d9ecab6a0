package schedule

import (
	"errors"
	"fmt"
)

// MaxFeedID bounds the feed ids the Queue and the Scheduler accept. Ids index
// flat arrays, so they should be dense: 0, 1, 2, … (a feed store's row
// numbers). The bound (16.7 million) keeps a stray id from allocating more
// than a few hundred megabytes.
const MaxFeedID = 1<<24 - 1

// ErrFeedID is returned for a feed id outside [0, MaxFeedID].
var ErrFeedID = errors.New("schedule: feed id out of range")

// Queue is an indexed priority queue of next fetch times: at most one entry
// per feed id, ordered by time (int64 nanoseconds, e.g. UnixNano) and then by
// id, so that equal times come out in a deterministic order. Push, update
// and remove are O(log n) and never allocate once the queue has grown to its
// size.
//
// The heap is 4-ary (half the depth of a binary heap, and the four children
// of a node share a cache line) and stored as a struct of arrays: the keys
// (8 bytes) and ids (4 bytes) of heap slots, plus each id's slot (4 bytes),
// i.e. 16 bytes per feed. A Queue is not safe for concurrent use.
type Queue struct {
	h   heap4
	pos []int32 // pos[id] is id's heap slot, or -1
}

// NewQueue returns an empty Queue with room for ids below capacity.
func NewQueue(capacity int) *Queue {
	if capacity < 0 {
		capacity = 0
	}
	if capacity > MaxFeedID+1 {
		capacity = MaxFeedID + 1
	}
	q := &Queue{
		h:   heap4{keys: make([]int64, 0, capacity), ids: make([]int32, 0, capacity)},
		pos: make([]int32, capacity),
	}
	for i := range q.pos {
		q.pos[i] = -1
	}
	return q
}

// Len returns the number of queued ids.
func (q *Queue) Len() int { return len(q.h.ids) }

// Set queues id at time at, or moves it there if it is already queued.
func (q *Queue) Set(id int, at int64) error {
	if id < 0 || id > MaxFeedID {
		return fmt.Errorf("%w: %d", ErrFeedID, id)
	}
	q.pos = growPos(q.pos, id)
	if i := q.pos[id]; i >= 0 {
		q.h.update(q.pos, int(i), at)
		return nil
	}
	q.h.push(q.pos, int32(id), at)
	return nil
}

// Get returns the time id is queued at.
func (q *Queue) Get(id int) (at int64, ok bool) {
	if id < 0 || id >= len(q.pos) || q.pos[id] < 0 {
		return 0, false
	}
	return q.h.keys[q.pos[id]], true
}

// Remove drops id from the queue and reports whether it was queued.
func (q *Queue) Remove(id int) bool {
	if id < 0 || id >= len(q.pos) || q.pos[id] < 0 {
		return false
	}
	q.h.removeAt(q.pos, int(q.pos[id]))
	return true
}

// Peek returns the earliest entry without removing it.
func (q *Queue) Peek() (id int, at int64, ok bool) {
	if len(q.h.ids) == 0 {
		return 0, 0, false
	}
	return int(q.h.ids[0]), q.h.keys[0], true
}

// Pop removes and returns the earliest entry.
func (q *Queue) Pop() (id int, at int64, ok bool) {
	if len(q.h.ids) == 0 {
		return 0, 0, false
	}
	id, at = int(q.h.ids[0]), q.h.keys[0]
	q.h.removeAt(q.pos, 0)
	return id, at, true
}

// growPos makes pos long enough to index id, filling new slots with -1.
func growPos(pos []int32, id int) []int32 {
	if id < len(pos) {
		return pos
	}
	n := len(pos)
	if id >= cap(pos) {
		c := 2 * cap(pos)
		if c < id+1 {
			c = id + 1
		}
		if c < 16 {
			c = 16
		}
		if c > MaxFeedID+1 {
			c = MaxFeedID + 1
		}
		np := make([]int32, n, c)
		copy(np, pos)
		pos = np
	}
	pos = pos[:id+1]
	for i := n; i <= id; i++ {
		pos[i] = -1
	}
	return pos
}

// heap4 is a 4-ary min-heap of (key, id) pairs. The slot of every id is
// written to a position array that the caller owns, so that several heaps
// can share one array when an id lives in at most one of them at a time
// (the Scheduler's waiting and ready queues).
type heap4 struct {
	keys []int64
	ids  []int32
}

func (h *heap4) len() int { return len(h.ids) }

func (h *heap4) less(i, j int) bool {
	return h.keys[i] < h.keys[j] || (h.keys[i] == h.keys[j] && h.ids[i] < h.ids[j])
}

func (h *heap4) push(pos []int32, id int32, key int64) {
	h.keys = append(h.keys, key)
	h.ids = append(h.ids, id)
	i := len(h.ids) - 1
	pos[id] = int32(i)
	h.up(pos, i)
}

// update sets the key of slot i and restores the heap order.
func (h *heap4) update(pos []int32, i int, key int64) {
	old := h.keys[i]
	h.keys[i] = key
	if key < old {
		h.up(pos, i)
	} else {
		h.down(pos, i)
	}
}

// removeAt deletes slot i; its id's position becomes -1.
func (h *heap4) removeAt(pos []int32, i int) {
	last := len(h.ids) - 1
	pos[h.ids[i]] = -1
	if i != last {
		h.keys[i], h.ids[i] = h.keys[last], h.ids[last]
		pos[h.ids[i]] = int32(i)
	}
	h.keys, h.ids = h.keys[:last], h.ids[:last]
	if i != last {
		if !h.up(pos, i) {
			h.down(pos, i)
		}
	}
}

// up sifts slot i towards the root; it reports whether the slot moved.
func (h *heap4) up(pos []int32, i int) bool {
	key, id := h.keys[i], h.ids[i]
	start := i
	for i > 0 {
		p := (i - 1) / 4
		if h.keys[p] < key || (h.keys[p] == key && h.ids[p] < id) {
			break
		}
		h.keys[i], h.ids[i] = h.keys[p], h.ids[p]
		pos[h.ids[i]] = int32(i)
		i = p
	}
	h.keys[i], h.ids[i] = key, id
	pos[id] = int32(i)
	return i != start
}

// down sifts slot i towards the leaves.
func (h *heap4) down(pos []int32, i int) {
	n := len(h.ids)
	key, id := h.keys[i], h.ids[i]
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		// Smallest of up to four children.
		m := c
		end := c + 4
		if end > n {
			end = n
		}
		for j := c + 1; j < end; j++ {
			if h.keys[j] < h.keys[m] || (h.keys[j] == h.keys[m] && h.ids[j] < h.ids[m]) {
				m = j
			}
		}
		if key < h.keys[m] || (key == h.keys[m] && id < h.ids[m]) {
			break
		}
		h.keys[i], h.ids[i] = h.keys[m], h.ids[m]
		pos[h.ids[i]] = int32(i)
		i = m
	}
	h.keys[i], h.ids[i] = key, id
	pos[id] = int32(i)
}
