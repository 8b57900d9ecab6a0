package jetstream

import "testing"

func TestKnownBoundsFeedsAndTracksSequences(t *testing.T) {
	k := newKnown(2)
	k.extend(1, 10, []string{"a"}, false)
	k.extend(2, 20, []string{"b"}, false)
	if _, ok := k.upTo(1); !ok { // 1 is now the most recently used
		t.Fatal("feed 1 missing")
	}
	k.extend(3, 30, []string{"c"}, false) // evicts 2
	if _, ok := k.upTo(2); ok {
		t.Fatal("feed 2 not evicted")
	}
	if !k.has(1, "a") || !k.has(3, "c") || k.has(2, "b") {
		t.Fatal("wrong members after eviction")
	}
	k.add(1, []string{"a2"})
	if up, _ := k.upTo(1); up != 10 || !k.has(1, "a2") {
		t.Fatalf("add moved the sequence to %d or lost the ID", up)
	}
	k.extend(1, 15, []string{"a3"}, false)
	if up, _ := k.upTo(1); up != 15 || !k.has(1, "a") || !k.has(1, "a3") {
		t.Fatal("extend did not keep earlier IDs")
	}
	k.extend(1, 5, []string{"x"}, true)
	if k.has(1, "a") || !k.has(1, "x") {
		t.Fatal("reset kept old IDs")
	}
	k.add(9, []string{"q"}) // unknown feed: nothing
	k.forget(1)
	if _, ok := k.upTo(1); ok || k.has(9, "q") {
		t.Fatal("forget or add on an unknown feed misbehaved")
	}
}
