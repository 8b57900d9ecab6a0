package cluster

import (
	"testing"
	"time"
)

func TestAcksSeenAt(t *testing.T) {
	now := t0.Add(time.Minute)
	at := func(d time.Duration) time.Time { return now.Add(-d) }
	tests := []struct {
		name string
		acks []ack
		rev  uint64
		want time.Time
	}{
		{"no acknowledgement: delivered now", nil, 10, now},
		{"only earlier revisions acknowledged", []ack{{5, at(8 * time.Second)}, {9, at(time.Second)}}, 10, now},
		{"the same revision does not date it", []ack{{10, at(3 * time.Second)}}, 10, now},
		{"a later revision acknowledged before now dates it", []ack{{5, at(8 * time.Second)}, {12, at(4 * time.Second)}}, 10, at(4 * time.Second)},
		{"the earliest of the later acknowledgements", []ack{{15, at(2 * time.Second)}, {11, at(6 * time.Second)}, {20, at(time.Second)}}, 10, at(6 * time.Second)},
		{"acknowledged out of revision order", []ack{{14, at(7 * time.Second)}, {12, at(5 * time.Second)}}, 10, at(7 * time.Second)},
		{"an acknowledgement after now does not date it", []ack{{12, now.Add(time.Second)}}, 10, now},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a Acks
			for _, m := range tt.acks {
				a.Add(m.rev, m.at)
			}
			if got := a.SeenAt(tt.rev, now); !got.Equal(tt.want) {
				t.Fatalf("SeenAt = %s before now, want %s before", now.Sub(got), now.Sub(tt.want))
			}
		})
	}
}

// TestAcksBounded: an Acks keeps the newest maxAcks acknowledgements.
func TestAcksBounded(t *testing.T) {
	var a Acks
	for i := range 3 * maxAcks {
		a.Add(uint64(100+i), t0.Add(time.Duration(i)*time.Millisecond))
	}
	if len(a.marks) != maxAcks {
		t.Fatalf("%d marks kept", len(a.marks))
	}
	oldest := a.marks[0]
	if want := uint64(100 + 2*maxAcks); oldest.rev != want {
		t.Fatalf("oldest kept revision %d, want %d", oldest.rev, want)
	}
	// A value older than every kept acknowledgement is dated by the
	// oldest kept one.
	if got := a.SeenAt(1, t0.Add(time.Hour)); !got.Equal(oldest.at) {
		t.Fatalf("SeenAt = %v, want the oldest kept %v", got, oldest.at)
	}
}
