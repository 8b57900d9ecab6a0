package jetstream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// AutoReplicas is the replica count assets get when their config asks for
// 0 on a JetStream cluster; a single server (not clustered) gives them 1.
const AutoReplicas = 3

// JetStream API error codes the asset helpers branch on.
const (
	errCodeNoPeers       jetstream.ErrorCode = 10005 // no suitable peers for placement
	errCodeInsufficient  jetstream.ErrorCode = 10023 // insufficient resources
	errCodeNotClustered  jetstream.ErrorCode = 10074 // replicas > 1 not supported in non-clustered mode
	placementRetryPeriod                     = 250 * time.Millisecond
)

func apiCode(err error) jetstream.ErrorCode {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode
	}
	return 0
}

// createAuto runs create with AutoReplicas replicas, or with 1 when the
// server is not clustered. While a cluster cannot place them yet (its
// servers are still joining, as when three `serve --nats-embed` start
// together) it tries again until ctx ends: falling back to one replica
// there would leave the data on a single server for good.
func createAuto[T any](ctx context.Context, create func(replicas int) (T, error)) (T, error) {
	for {
		v, err := create(AutoReplicas)
		switch apiCode(err) {
		case errCodeNotClustered:
			return create(1)
		case errCodeNoPeers, errCodeInsufficient:
			select {
			case <-ctx.Done():
				return v, fmt.Errorf("%w (cluster cannot place %d replicas yet: %v)", ctx.Err(), AutoReplicas, err)
			case <-time.After(placementRetryPeriod):
				continue
			}
		}
		return v, err
	}
}

// KeyValue opens the KV bucket cfg.Bucket, creating it with cfg when it
// does not exist. cfg.Replicas 0 means AutoReplicas on a cluster (waiting,
// within ctx, until the cluster can place them) and 1 on a single server.
// An existing bucket is used as it is (its replicas are an operator's
// choice).
func KeyValue(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := RetryUnanswered(ctx, func(ctx context.Context) (jetstream.KeyValue, error) { return keyValue(ctx, js, cfg) })
	if err != nil {
		return nil, err
	}
	s, err := RetryUnanswered(ctx, func(ctx context.Context) (jetstream.Stream, error) { return js.Stream(ctx, kvStreamPrefix+cfg.Bucket) })
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", cfg.Bucket, err)
	}
	if err := answering(ctx, s); err != nil {
		return nil, fmt.Errorf("bucket %s: %w", cfg.Bucket, err)
	}
	return kv, nil
}

// kvStreamPrefix names a KV bucket's stream: KV_ and the bucket's name.
const kvStreamPrefix = "KV_"

func keyValue(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if err == nil {
		return kv, nil
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("open bucket %s: %w", cfg.Bucket, err)
	}
	if cfg.Replicas == 0 {
		kv, err = createAuto(ctx, func(r int) (jetstream.KeyValue, error) {
			c := cfg
			c.Replicas = r
			return js.CreateKeyValue(ctx, c)
		})
	} else {
		kv, err = js.CreateKeyValue(ctx, cfg)
	}
	if errors.Is(err, jetstream.ErrBucketExists) { // another node created it meanwhile
		kv, err = js.KeyValue(ctx, cfg.Bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("create bucket %s: %w", cfg.Bucket, err)
	}
	return kv, nil
}

// Stream opens the stream cfg.Name, creating it with cfg when it does not
// exist; cfg.Replicas 0 is handled as in KeyValue. An existing stream is
// updated to cfg's subjects and limits, keeping its replicas.
func Stream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	s, err := RetryUnanswered(ctx, func(ctx context.Context) (jetstream.Stream, error) { return stream(ctx, js, cfg) })
	if err != nil {
		return nil, err
	}
	if err := answering(ctx, s); err != nil {
		return nil, fmt.Errorf("stream %s: %w", cfg.Name, err)
	}
	return s, nil
}

// errNoLeader is a stream's info answered while it has no leader.
var errNoLeader = errors.New("stream has no leader yet")

// answering returns once s answers the calls the Store makes of it: its
// info names a leader (who stores publishes) and, when the stream allows
// direct gets, a get of a subject no one publishes to comes back "not
// found". A stream just created on a cluster has neither for a moment:
// the first publish or read would get "no responders". It tries again
// while s is unanswered, until ctx ends; another error ends it at once.
//
// A stream this server has just created can also be unknown for a moment
// to the server that answers its info ("stream not found" while the meta
// leader's assignment reaches it): answering takes that as unanswered too.
func answering(ctx context.Context, s jetstream.Stream) error {
	_, err := RetryUnanswered(ctx, func(ctx context.Context) (struct{}, error) {
		err := probeStream(ctx, s)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			err = fmt.Errorf("%w: %w", errNotAssigned, err)
		}
		return struct{}{}, err
	})
	return err
}

// leaderInfo is stream s's info (with opts) as its leader answers it.
// While a replicated stream has no leader (an election, a lost quorum),
// each of its replicas answers an info request itself, from its own
// state, which lags the stream by what was stored while the replica was
// away or behind (a server just restarted): its subject counts and last
// sequence are then too low. Such an answer, which names no leader, is
// errNoLeader (unanswered: asked again, or a 503 for a request) instead.
func leaderInfo(ctx context.Context, s jetstream.Stream, opts ...jetstream.StreamInfoOpt) (*jetstream.StreamInfo, error) {
	info, err := s.Info(ctx, opts...)
	if err != nil {
		return nil, err
	}
	if info.Cluster != nil && info.Cluster.Leader == "" {
		return nil, errNoLeader
	}
	return info, nil
}

// errNotAssigned is a stream's info answered "not found" right after the
// stream was opened or created.
var errNotAssigned = errors.New("stream not assigned yet")

// probeSubject is the subject answering reads from a stream: it matches
// none of the subjects slogfeed publishes to.
const probeSubject = "slogfeed.probe.none"

func probeStream(ctx context.Context, s jetstream.Stream) error {
	info, err := leaderInfo(ctx, s)
	if err != nil {
		return err
	}
	if !info.Config.AllowDirect {
		return nil
	}
	if _, err := s.GetLastMsgForSubject(ctx, probeSubject); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return err
	}
	return nil
}

func stream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	s, err := js.Stream(ctx, cfg.Name)
	if err == nil {
		cfg.Replicas = s.CachedInfo().Config.Replicas
		if s, err = js.UpdateStream(ctx, cfg); err != nil {
			return nil, fmt.Errorf("update stream %s: %w", cfg.Name, err)
		}
		return s, nil
	}
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("open stream %s: %w", cfg.Name, err)
	}
	if cfg.Replicas == 0 {
		s, err = createAuto(ctx, func(r int) (jetstream.Stream, error) {
			c := cfg
			c.Replicas = r
			return js.CreateStream(ctx, c)
		})
	} else {
		s, err = js.CreateStream(ctx, cfg)
	}
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		s, err = js.Stream(ctx, cfg.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("create stream %s: %w", cfg.Name, err)
	}
	return s, nil
}

// assetAttempt bounds one try of opening or creating an asset.
const assetAttempt = 5 * time.Second

// jsClusterNotAvailable is the JetStream API's error code for "JetStream
// system temporarily unavailable": the meta group has no leader yet (a
// cluster coming back from a lost quorum).
const jsClusterNotAvailable = 10008

// temporarilyUnavailable reports whether err is the JetStream API saying
// it is temporarily unavailable.
func temporarilyUnavailable(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && api.ErrorCode == jsClusterNotAvailable
}

// unanswered reports whether err is a request the cluster left
// unanswered or could not serve yet (see RetryUnanswered).
func unanswered(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, errNoLeader) || errors.Is(err, errNotAssigned) || temporarilyUnavailable(err)
}

// RetryUnanswered runs open, each time within assetAttempt, again while
// the cluster leaves it unanswered (a JetStream API request timing out, no
// responders, no response from a stream, a stream with no leader yet, the
// API temporarily unavailable: a meta or stream leader being elected, as
// while servers start together or come back from a lost quorum),
// until ctx ends (under a context of failFast, a cluster's answer that it
// is temporarily unavailable ends it at once; a passing "no responders"
// or timeout is still asked again). Other
// errors, and success, end it at once. open must be
// safe to repeat: opening and creating an asset are (an attempt whose
// create went through finds the asset next), and so is a KV create, whose
// repeat after a lost answer reports the key as existing.
func RetryUnanswered[T any](ctx context.Context, open func(context.Context) (T, error)) (T, error) {
	for {
		actx, cancel := context.WithTimeout(ctx, assetAttempt)
		v, err := open(actx)
		cancel()
		if err == nil || !unanswered(err) || ctx.Err() != nil || ctx.Value(failFastKey{}) != nil && temporarilyUnavailable(err) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(placementRetryPeriod):
		}
	}
}

// failFastKey marks a context of failFast.
type failFastKey struct{}

// failFast returns ctx for a read that a client waits on and that should
// rather fail than wait for the cluster: RetryUnanswered stops at the
// cluster's answer that it is temporarily unavailable, so that a cluster
// without a quorum, which answers so at once, is reported as unavailable
// at once too (the HTTP API answers 503) rather than at the end of the
// call's timeout. A passing "no responders" (about one read in twenty
// while consumers are created on a loaded cluster) is still asked again:
// taken for unavailability, it made most feed pages a 503.
func failFast(ctx context.Context) context.Context {
	return context.WithValue(ctx, failFastKey{}, true)
}
