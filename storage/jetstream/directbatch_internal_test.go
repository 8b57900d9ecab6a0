package jetstream

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestDirectBatchFallsBack: a batched direct get whose answer is not one
// the read by the index can vouch for makes it errNoVouch, so the query
// reads the whole subject, rather than failing: a server that answers
// the first message alone (before batched direct gets), another status,
// an answer whose end never comes (within directIdle, not the call's
// timeout).
func TestDirectBatchFallsBack(t *testing.T) {
	s, nc := storeOnBareServer(t)
	subject := itemSubject(1)
	msg := func(reply string, seq uint64, pending bool) *nats.Msg {
		m := nats.NewMsg(reply)
		m.Header.Set(jetstream.SequenceHeader, strconv.FormatUint(seq, 10))
		m.Header.Set(jetstream.SubjectHeader, subject)
		if pending {
			m.Header.Set(numPendingHeader, "0")
		}
		m.Data = []byte(`{}`)
		return m
	}
	status := func(reply, code string) *nats.Msg {
		m := nats.NewMsg(reply)
		m.Header.Set("Status", code)
		return m
	}
	for _, c := range []struct {
		name   string
		answer func(reply string) []*nats.Msg
	}{
		{"a server without batches", func(r string) []*nats.Msg { return []*nats.Msg{msg(r, 5, false)} }},
		{"another status", func(r string) []*nats.Msg { return []*nats.Msg{status(r, "408")} }},
		{"no end of the batch", func(r string) []*nats.Msg { return []*nats.Msg{msg(r, 5, true)} }},
		{"no answer", func(string) []*nats.Msg { return nil }},
	} {
		t.Run(c.name, func(t *testing.T) {
			sub, err := nc.Subscribe("$JS.API.DIRECT.GET."+ItemsStream, func(req *nats.Msg) {
				for _, m := range c.answer(req.Reply) {
					_ = nc.PublishMsg(m)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = sub.Unsubscribe() }()
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second) // a call's timeout
			defer cancel()
			start := time.Now()
			_, err = s.directBatch(ctx, subject, 1, 10, func(uint64, []byte) error { return nil })
			if !errors.Is(err, errNoVouch) {
				t.Fatalf("directBatch: %v, want errNoVouch", err)
			}
			if d := time.Since(start); d > directIdle+2*time.Second {
				t.Errorf("directBatch took %v", d)
			}
		})
	}
}
