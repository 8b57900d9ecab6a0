package jetstream

// BodiesRead returns how many item messages s's queries have read whole
// (Items, Item, snapshots), for tests that bound what a query reads.
func BodiesRead(s *Store) uint64 { return s.bodies.Load() }

// ItemReaders returns how many consumers s has created to read items,
// for tests that expect a query answered by batched gets.
func ItemReaders(s *Store) uint64 { return s.readers.Load() }
