package aggregator

import "time"

// Overdue returns, in no particular order, the feeds the service
// schedules whose planned fetch is before before and not yet made:
// waiting for the live loop, held back by the budget, or under way
// (schedule.Scheduler.AppendOverdue). Its cost grows with those feeds,
// not with the fleet: the web API counts and lists the starved feeds
// with it.
func (s *Service) Overdue(before time.Time) []uint64 {
	ids := s.sched.AppendOverdue(nil, before)
	out := make([]uint64, len(ids))
	for i, id := range ids {
		out[i] = uint64(id)
	}
	return out
}
