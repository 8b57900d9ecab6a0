package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// get reads key of the bucket named bucket as kv.Get does, and checks a
// "not found" with the bucket stream's leader. A KV Get is a direct get,
// which any replica answers: on a replicated bucket a follower that has
// not applied an acknowledged write yet answers "not found", so a feed
// created on one node (a sensor's, on its first reading) was not found
// by the very next read. The leader has every acknowledged write.
func (s *Store) get(ctx context.Context, kv jetstream.KeyValue, bucket, key string) (jetstream.KeyValueEntry, error) {
	e, err := kv.Get(ctx, key)
	if !errors.Is(err, jetstream.ErrKeyNotFound) {
		return e, err
	}
	le, lerr := s.leaderGet(ctx, bucket, key)
	if lerr != nil {
		return nil, lerr
	}
	if le == nil {
		return nil, err // not found on the leader either
	}
	return le, nil
}

// msgGetResponse is JetStream's answer to STREAM.MSG.GET.
type msgGetResponse struct {
	Message *leaderMsg `json:"message"`
	Error   *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error"`
}

// err returns the answer's error as the JetStream API error it is, so
// that errors.As finds it (a "temporarily unavailable" answer, without a
// quorum, is then one the Backend calls unavailable); nil when the answer
// has none.
func (r *msgGetResponse) err() error {
	if r.Error == nil {
		return nil
	}
	return &jetstream.APIError{Code: r.Error.Code, ErrorCode: jetstream.ErrorCode(r.Error.ErrCode), Description: r.Error.Description}
}

// errCodeNoMessage is JetStream's error code for "no message found".
const errCodeNoMessage = 10037

// leaderMsg is a message the leader of a stream holds.
type leaderMsg = struct {
	Subject string    `json:"subject"`
	Seq     uint64    `json:"seq"`
	Header  []byte    `json:"hdrs"`
	Data    []byte    `json:"data"`
	Time    time.Time `json:"time"`
}

// leaderMsgGet asks the leader of stream for the message req names (a
// STREAM.MSG.GET request: {"last_by_subj": …} or {"seq": …,
// "next_by_subj": …}), which only the leader answers; nil when it holds
// none. An error the leader answers is the JetStream API error it is
// (msgGetResponse.err).
func (s *Store) leaderMsgGet(ctx context.Context, stream string, req any) (*leaderMsg, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	msg, err := s.js.Conn().RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+stream, body)
	if err != nil {
		return nil, err
	}
	var resp msgGetResponse
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return nil, err
	}
	switch {
	case resp.Error != nil && (resp.Error.ErrCode == errCodeNoMessage || resp.Error.Code == 404):
		return nil, nil
	case resp.Error != nil:
		return nil, resp.err()
	case resp.Message == nil:
		return nil, errors.New("empty answer")
	}
	return resp.Message, nil
}

// leaderGet reads the newest value of key from the bucket stream's leader
// (a non-direct message get); nil when there is none or it was deleted.
func (s *Store) leaderGet(ctx context.Context, bucket, key string) (jetstream.KeyValueEntry, error) {
	m, err := s.leaderMsgGet(ctx, "KV_"+bucket, map[string]string{"last_by_subj": "$KV." + bucket + "." + key})
	switch {
	case err != nil:
		return nil, fmt.Errorf("get %s from the leader: %w", key, err)
	case m == nil:
		return nil, nil
	}
	h := string(m.Header)
	if strings.Contains(h, "KV-Operation: DEL") || strings.Contains(h, "KV-Operation: PURGE") {
		return nil, nil
	}
	return leaderEntry{bucket: bucket, key: key, value: m.Data, rev: m.Seq, at: m.Time}, nil
}

// leaderEntry is a KV entry read from the leader.
type leaderEntry struct {
	bucket, key string
	value       []byte
	rev         uint64
	at          time.Time
}

func (e leaderEntry) Bucket() string                  { return e.bucket }
func (e leaderEntry) Key() string                     { return e.key }
func (e leaderEntry) Value() []byte                   { return e.value }
func (e leaderEntry) Revision() uint64                { return e.rev }
func (e leaderEntry) Created() time.Time              { return e.at }
func (e leaderEntry) Delta() uint64                   { return 0 }
func (e leaderEntry) Operation() jetstream.KeyValueOp { return jetstream.KeyValuePut }
