package schedule

import "time"

// AppendOverdue appends to dst, in no particular order, the feeds whose
// due time is before before and whose poll has not been made: those
// waiting for a Due call, those due but held back by the budget (ready
// or parked behind their host's limit) and those granted and not yet
// Done or Cancelled. A feed whose Done is consulting its policy at that
// moment, or that was removed, is left out.
//
// Its cost grows with the feeds it may report, not with the feeds
// scheduled: the prefix of the waiting heap due before before, every
// feed granted or held back by the budget (few while the budget keeps
// up), and, only while feeds are parked, a pass over the hosts.
func (s *Scheduler) AppendOverdue(dst []int, before time.Time) []int {
	n, ok := nanos(before)
	if !ok {
		return dst
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.overdue(n, func(id int32) { dst = append(dst, int(id)) })
	return dst
}

// CountOverdue is len(AppendOverdue(nil, before)) without the list.
func (s *Scheduler) CountOverdue(before time.Time) int {
	n, ok := nanos(before)
	if !ok {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := 0
	s.overdue(n, func(int32) { c++ })
	return c
}

// overdue calls fn with every feed of AppendOverdue at Unix ns n, and
// returns how many slots of the waiting heap it read. s.mu is held.
func (s *Scheduler) overdue(n int64, fn func(id int32)) (read int) {
	read = s.waiting.prefix(n, fn)
	late := func(id int32) {
		if s.feeds[id].due < n {
			fn(id)
		}
	}
	for c := range s.ready {
		h := &s.ready[c]
		if s.cfg.Order == OrderFIFO {
			h.prefix(n, fn) // keyed by due time
			continue
		}
		for _, id := range h.ids {
			late(id)
		}
	}
	for c := range s.fresh {
		for _, id := range s.fresh[c].ids {
			late(id)
		}
	}
	if s.nparked > 0 {
		for i := range s.hosts {
			for _, id := range s.hosts[i].parked {
				late(id)
			}
		}
	}
	for _, id := range s.flying {
		if s.feeds[id].state == stInFlight {
			late(id)
		}
	}
	return read
}

// unfly takes granted feed id out of flying. s.mu is held.
func (s *Scheduler) unfly(id int) {
	i := s.pos[id]
	last := len(s.flying) - 1
	if int(i) != last {
		s.flying[i] = s.flying[last]
		s.pos[s.flying[i]] = i
	}
	s.flying = s.flying[:last]
	s.pos[id] = -1
}

// prefix calls fn with the id of every entry whose key is below n, in no
// particular order, and returns how many slots it read: the heap's order
// lets the walk skip every subtree whose root is not below n, so it reads
// at most five slots per entry it reports, plus one.
func (h *heap4) prefix(n int64, fn func(id int32)) (read int) {
	if len(h.keys) == 0 {
		return 0
	}
	if h.keys[0] >= n {
		return 1
	}
	var stack [64]int32 // grows on the heap only for a wide walk
	todo := append(stack[:0], 0)
	read = 1
	for len(todo) > 0 {
		i := int(todo[len(todo)-1])
		todo = todo[:len(todo)-1]
		fn(h.ids[i])
		for c := 4*i + 1; c <= 4*i+4 && c < len(h.keys); c++ {
			read++
			if h.keys[c] < n {
				todo = append(todo, int32(c))
			}
		}
	}
	return read
}
