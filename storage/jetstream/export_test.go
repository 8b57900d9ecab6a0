package jetstream

// BodiesRead returns how many item messages s's queries have read whole
// (Items, Item, snapshots), for tests that bound what a query reads.
func BodiesRead(s *Store) uint64 { return s.bodies.Load() }
