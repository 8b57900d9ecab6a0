package jetstream

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// AutoReplicas is the replica count assets get when their config asks for
// 0: 3 on a JetStream cluster that can place them, else 1 (a single
// server, or a cluster of fewer than 3).
const AutoReplicas = 3

// KeyValue opens the KV bucket cfg.Bucket, creating it with cfg when it
// does not exist. cfg.Replicas 0 means AutoReplicas when the cluster
// allows it, else 1. An existing bucket is used as it is (its replicas are
// an operator's choice).
func KeyValue(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if err == nil {
		return kv, nil
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("open bucket %s: %w", cfg.Bucket, err)
	}
	auto := cfg.Replicas == 0
	if auto {
		cfg.Replicas = AutoReplicas
	}
	kv, err = js.CreateKeyValue(ctx, cfg)
	if err != nil && auto && !errors.Is(err, jetstream.ErrBucketExists) && ctx.Err() == nil {
		cfg.Replicas = 1
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
	auto := cfg.Replicas == 0
	if auto {
		cfg.Replicas = AutoReplicas
	}
	s, err = js.CreateStream(ctx, cfg)
	if err != nil && auto && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) && ctx.Err() == nil {
		cfg.Replicas = 1
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
