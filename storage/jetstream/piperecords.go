package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/slogfeed/slogfeed/storage"
)

// Pipe records live in DefsBucket beside the feeds: pipe.<id> holds the
// storage.Pipe (definition, runner state, counters), seq.pipe the ID
// sequence; IndexBucket's pipe.<hash of slug> holds the pipe ID of a slug,
// so slugs are unique among pipes. bbolt's multi-bucket transactions
// become ordered writes whose last step is a compare-and-set:
//
//   - CreatePipe: the slug key (KV Create: ErrPipeExists if taken), the
//     output feed (CreateFeed: ErrFeedExists), the pipe ID, the record
//     (KV Create). A failure deletes what the earlier steps wrote; a crash
//     between them leaves a slug key without a record (CreatePipe of that
//     slug then fails with ErrPipeExists until it is deleted) or an output
//     feed without a pipe.
//   - CommitPipeRun: the outputs are stored as AddItems stores them (each
//     ID once, however often they are sent), then the record is updated at
//     the revision read. A crash between the two leaves outputs stored and
//     the state not advanced: the rerun stores nothing twice.
//   - DeletePipe: the record (at the revision read), then the slug key,
//     the output feed and the input consumer.
const (
	pipeKeyPrefix = "pipe."
	pipeSeqKey    = "seq.pipe"
)

func pipeKey(id uint64) string { return pipeKeyPrefix + strconv.FormatUint(id, 10) }

func pipeSlugKey(slug string) string { return "pipe." + hashKey(slug) }

// CreatePipe stores p and its output feed out, which must be of
// storage.KindPipe with p's slug, and sets p.ID, p.FeedID, out.ID and
// both Created and Updated. It refuses what the bbolt store refuses
// (storage.ErrInvalid, storage.ErrPipeExists, storage.ErrFeedExists);
// p and out are then unchanged.
func (s *Store) CreatePipe(ctx context.Context, p *storage.Pipe, out *storage.Feed) error {
	if p == nil || out == nil {
		return fmt.Errorf("create pipe: %w: nil pipe or output feed", storage.ErrInvalid)
	}
	if out.Kind != storage.KindPipe || out.Slug != p.Slug {
		return fmt.Errorf("create pipe %q: %w: the output feed must be of kind pipe with the pipe's slug", p.Slug, storage.ErrInvalid)
	}
	now := s.opt.Now()
	np, nf := *p, *out
	np.Created, np.Updated = now, now
	if err := storage.ValidatePipe(&np); err != nil {
		return fmt.Errorf("create pipe %q: %w", p.Slug, err)
	}
	sk := pipeSlugKey(np.Slug)
	if _, err := s.index.Create(ctx, sk, []byte("0")); s.opt.Metrics.kvWrite(IndexBucket, err) != nil {
		if IsConflict(err) {
			return fmt.Errorf("create pipe %q: %w", p.Slug, storage.ErrPipeExists)
		}
		return fmt.Errorf("create pipe %q: %w", p.Slug, err)
	}
	undo := func(err error) error {
		if nf.ID != 0 {
			err = errors.Join(err, s.DeleteFeed(ctx, nf.ID))
		}
		return errors.Join(err, s.opt.Metrics.kvWrite(IndexBucket, s.index.Delete(ctx, sk)))
	}
	if err := s.CreateFeed(ctx, &nf); err != nil {
		nf.ID = 0
		return fmt.Errorf("create pipe %q: %w", p.Slug, undo(err))
	}
	id, err := s.nextID(ctx, pipeSeqKey)
	if err != nil {
		return fmt.Errorf("create pipe %q: %w", p.Slug, undo(err))
	}
	np.ID, np.FeedID = id, nf.ID
	data, err := json.Marshal(&np)
	if err != nil {
		return fmt.Errorf("create pipe %q: %w", p.Slug, undo(err))
	}
	if _, err := s.defs.Create(ctx, pipeKey(id), data); s.opt.Metrics.kvWrite(DefsBucket, err) != nil {
		return fmt.Errorf("create pipe %q: %w", p.Slug, undo(err))
	}
	if _, err := s.index.Put(ctx, sk, []byte(strconv.FormatUint(id, 10))); s.opt.Metrics.kvWrite(IndexBucket, err) != nil {
		return fmt.Errorf("create pipe %q: slug index: %w", p.Slug, err)
	}
	*p, *out = np, nf
	return nil
}

// Pipe returns the pipe with this ID, or storage.ErrPipeNotFound.
func (s *Store) Pipe(ctx context.Context, id uint64) (storage.Pipe, error) {
	p, _, err := s.pipe(ctx, id)
	return p, err
}

func (s *Store) pipe(ctx context.Context, id uint64) (storage.Pipe, uint64, error) {
	e, err := s.get(ctx, s.defs, DefsBucket, pipeKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return storage.Pipe{}, 0, fmt.Errorf("pipe %d: %w", id, storage.ErrPipeNotFound)
	}
	if err != nil {
		return storage.Pipe{}, 0, fmt.Errorf("pipe %d: %w", id, err)
	}
	var p storage.Pipe
	if err := json.Unmarshal(e.Value(), &p); err != nil || p.ID != id {
		return storage.Pipe{}, 0, fmt.Errorf("pipe %d: %w: %v", id, storage.ErrCorrupt, err)
	}
	return p, e.Revision(), nil
}

// Pipes returns every pipe, by ID.
func (s *Store) Pipes(ctx context.Context) ([]storage.Pipe, error) {
	ids, err := s.listIDs(ctx, pipeKeyPrefix)
	if err != nil {
		return nil, fmt.Errorf("list pipes: %w", err)
	}
	out := make([]storage.Pipe, 0, len(ids))
	for _, id := range ids {
		p, err := s.Pipe(ctx, id)
		if errors.Is(err, storage.ErrPipeNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// DeletePipe deletes the pipe, its slug key, its output feed and its input
// consumer.
func (s *Store) DeletePipe(ctx context.Context, id uint64) error {
	p, rev, err := s.pipe(ctx, id)
	if err != nil {
		return err
	}
	if err := s.opt.Metrics.kvWrite(DefsBucket, s.defs.Delete(ctx, pipeKey(id), jetstream.LastRevision(rev))); err != nil {
		if IsConflict(err) {
			return fmt.Errorf("delete pipe %d: %w", id, ErrStale)
		}
		return fmt.Errorf("delete pipe %d: %w", id, err)
	}
	errs := []error{s.opt.Metrics.kvWrite(IndexBucket, s.index.Delete(ctx, pipeSlugKey(p.Slug)))}
	if err := s.DeleteFeed(ctx, p.FeedID); err != nil && !errors.Is(err, storage.ErrFeedNotFound) {
		errs = append(errs, err)
	}
	if err := s.DeletePipeInputs(ctx, id); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("delete pipe %d: %w", id, err)
	}
	return nil
}

// CommitPipeRun records a run of the pipe as the bbolt store does: a
// successful run (run.Err empty) stores the outputs out in the output feed
// (each item ID once) and then the new state (nil keeps it), Runs,
// LastRun, and clears the error; a failed one stores nothing but the
// counters and the error. An invalid output refuses the whole commit.
// The outputs are stored before the record; see the ordering above.
func (s *Store) CommitPipeRun(ctx context.Context, pipeID uint64, state json.RawMessage, out []storage.Item, run storage.PipeRun) ([]storage.Item, error) {
	ok := run.Err == ""
	if ok && len(state) > storage.MaxPipeSize {
		return nil, fmt.Errorf("commit run of pipe %d: %w: state is %d bytes, more than %d", pipeID, storage.ErrInvalid, len(state), storage.MaxPipeSize)
	}
	if ok && state != nil && !json.Valid(state) {
		return nil, fmt.Errorf("commit run of pipe %d: %w: state is not valid JSON", pipeID, storage.ErrInvalid)
	}
	var added []storage.Item
	if ok {
		p, err := s.Pipe(ctx, pipeID)
		if err != nil {
			return nil, err
		}
		f, err := s.Feed(ctx, p.FeedID)
		if errors.Is(err, storage.ErrFeedNotFound) || err == nil && f.Kind != storage.KindPipe {
			return nil, fmt.Errorf("commit run of pipe %d: %w: output feed %d missing or not a pipe feed", pipeID, storage.ErrCorrupt, p.FeedID)
		}
		if err != nil {
			return nil, err
		}
		if err := storage.ValidateItems(p.FeedID, out, s.opt.Now()); err != nil {
			return nil, fmt.Errorf("commit run of pipe %d: %w", pipeID, err)
		}
		if added, err = s.AddFeedItems(ctx, f, out); err != nil {
			return nil, fmt.Errorf("commit run of pipe %d: %w", pipeID, err)
		}
	}
	for range maxRetries {
		p, rev, err := s.pipe(ctx, pipeID)
		if err != nil {
			return nil, err
		}
		p.Runs++
		p.LastRun = run.At
		if ok {
			p.LastError, p.ErrorCount = "", 0
			if state != nil {
				p.State = state
			}
		} else {
			p.LastError = storage.TruncateUTF8(run.Err, storage.MaxPipeErrorLen)
			p.ErrorCount++
		}
		data, err := json.Marshal(&p)
		if err != nil {
			return nil, fmt.Errorf("commit run of pipe %d: %w", pipeID, err)
		}
		_, err = s.defs.Update(ctx, pipeKey(pipeID), data, rev)
		if s.opt.Metrics.kvWrite(DefsBucket, err) == nil {
			return added, nil
		}
		if !IsConflict(err) {
			return nil, fmt.Errorf("commit run of pipe %d: %w", pipeID, err)
		}
	}
	return nil, fmt.Errorf("commit run of pipe %d: %w", pipeID, ErrStale)
}

// CreatePipe is Store.CreatePipe.
func (b *Backend) CreatePipe(p *storage.Pipe, out *storage.Feed) error {
	ctx, cancel := b.call()
	defer cancel()
	return b.s.CreatePipe(ctx, p, out)
}

// Pipe is Store.Pipe.
func (b *Backend) Pipe(id uint64) (storage.Pipe, error) {
	ctx, cancel := b.call()
	defer cancel()
	return b.s.Pipe(ctx, id)
}

// Pipes is Store.Pipes.
func (b *Backend) Pipes() ([]storage.Pipe, error) {
	ctx, cancel := b.call()
	defer cancel()
	return b.s.Pipes(ctx)
}

// DeletePipe is Store.DeletePipe.
func (b *Backend) DeletePipe(id uint64) error {
	ctx, cancel := b.call()
	defer cancel()
	return b.s.DeletePipe(ctx, id)
}

// CommitPipeRun is Store.CommitPipeRun.
func (b *Backend) CommitPipeRun(pipeID uint64, state json.RawMessage, out []storage.Item, run storage.PipeRun) ([]storage.Item, error) {
	ctx, cancel := b.call()
	defer cancel()
	return b.s.CommitPipeRun(ctx, pipeID, state, out, run)
}

// UpdatePipeFeed stores p's slug, definition, state and counters and
// applies edit (when not nil) to the output feed, after a rename, as the
// bbolt store does; edit may not change the feed's kind or slug
// (storage.ErrInvalid) and may run more than once. An error of edit (run
// first on a copy) is returned with nothing written.
//
// The steps: a rename first claims the new slug keys (the pipe's and the
// output feed's, KV Create), then the pipe record is written at the
// revision read (storage.ErrPipeNotFound, or ErrStale when another writer
// changed it: the claims are released), then the output feed (re-read and
// re-applied on a conflict), then the old slug keys are deleted. A crash
// after the pipe record leaves the output feed under its old slug, which
// the next UpdatePipeFeed of the pipe repairs.
func (s *Store) UpdatePipeFeed(ctx context.Context, p storage.Pipe, edit func(*storage.Feed) error) error {
	old, rev, err := s.pipe(ctx, p.ID)
	if err != nil {
		return err
	}
	np := old
	np.Slug, np.Def, np.State = p.Slug, p.Def, p.State
	np.Runs, np.LastRun, np.LastError, np.ErrorCount = p.Runs, p.LastRun, p.LastError, p.ErrorCount
	np.Updated = s.opt.Now()
	if err := storage.ValidatePipe(&np); err != nil {
		return fmt.Errorf("update pipe %d: %w", p.ID, err)
	}
	apply := func(f *storage.Feed) error {
		if f.Kind != storage.KindPipe {
			return fmt.Errorf("update pipe %d: %w: output feed %d is a %s feed", p.ID, storage.ErrCorrupt, f.ID, f.Kind)
		}
		f.Slug = np.Slug
		if edit == nil {
			return nil
		}
		if err := edit(f); err != nil {
			return err
		}
		if f.Kind != storage.KindPipe || f.Slug != np.Slug {
			return fmt.Errorf("update pipe %d: %w: the output feed must stay a pipe feed named %q", p.ID, storage.ErrInvalid, np.Slug)
		}
		return nil
	}
	f, err := s.Feed(ctx, old.FeedID)
	if errors.Is(err, storage.ErrFeedNotFound) {
		return fmt.Errorf("update pipe %d: %w: output feed %d missing", p.ID, storage.ErrCorrupt, old.FeedID)
	}
	if err != nil {
		return err
	}
	dry := f
	if err := apply(&dry); err != nil {
		return err
	}
	oldFeedSlug := f.Slug
	var claimed []jetstreamKey
	release := func(err error) error {
		for _, k := range claimed {
			err = errors.Join(err, s.opt.Metrics.kvWrite(IndexBucket, s.index.Delete(ctx, k.key)))
		}
		return err
	}
	if np.Slug != oldFeedSlug || np.Slug != old.Slug {
		for _, k := range []jetstreamKey{
			{pipeSlugKey(np.Slug), np.ID, storage.ErrPipeExists},
			{indexKeyOf(&storage.Feed{Kind: storage.KindPipe, Slug: np.Slug}), f.ID, storage.ErrFeedExists},
		} {
			mine, err := s.claimIndex(ctx, k)
			if err != nil {
				return fmt.Errorf("update pipe %d: %w", p.ID, release(err))
			}
			if mine {
				claimed = append(claimed, k)
			}
		}
	}
	data, err := json.Marshal(&np)
	if err != nil {
		return fmt.Errorf("update pipe %d: %w", p.ID, release(err))
	}
	if _, err := s.defs.Update(ctx, pipeKey(np.ID), data, rev); s.opt.Metrics.kvWrite(DefsBucket, err) != nil {
		if IsConflict(err) {
			err = ErrStale
		}
		return fmt.Errorf("update pipe %d: %w", p.ID, release(err))
	}
	if err := s.rewriteFeed(ctx, f.ID, apply); err != nil {
		return fmt.Errorf("update pipe %d: output feed: %w", p.ID, err)
	}
	var errs []error
	if old.Slug != np.Slug {
		errs = append(errs, s.opt.Metrics.kvWrite(IndexBucket, s.index.Delete(ctx, pipeSlugKey(old.Slug))))
	}
	if oldFeedSlug != np.Slug {
		errs = append(errs, s.opt.Metrics.kvWrite(IndexBucket, s.index.Delete(ctx, indexKeyOf(&storage.Feed{Kind: storage.KindPipe, Slug: oldFeedSlug}))))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("update pipe %d: old slug keys: %w", p.ID, err)
	}
	return nil
}

// jetstreamKey is a unique-index key to claim for id; taken is the error
// when another record holds it.
type jetstreamKey struct {
	key   string
	id    uint64
	taken error
}

// claimIndex creates k for k.id; it reports false when k already named
// k.id (nothing to release) and fails with k.taken when it names another.
func (s *Store) claimIndex(ctx context.Context, k jetstreamKey) (bool, error) {
	val := []byte(strconv.FormatUint(k.id, 10))
	_, err := s.index.Create(ctx, k.key, val)
	if s.opt.Metrics.kvWrite(IndexBucket, err) == nil {
		return true, nil
	}
	if !IsConflict(err) {
		return false, err
	}
	e, gerr := s.index.Get(ctx, k.key)
	if gerr == nil && string(e.Value()) == string(val) {
		return false, nil
	}
	return false, k.taken
}

// rewriteFeed applies fn to the feed and writes it at the revision read,
// re-reading and re-applying on a conflict. Unlike UpdateFeed, fn may
// change the slug (the caller keeps the index keys).
func (s *Store) rewriteFeed(ctx context.Context, id uint64, fn func(*storage.Feed) error) error {
	for range maxRetries {
		rec, rev, err := s.record(ctx, id)
		if err != nil {
			return err
		}
		f := rec.Feed
		nf := f
		if err := fn(&nf); err != nil {
			return err
		}
		nf.ID, nf.Created, nf.Updated = f.ID, f.Created, s.opt.Now()
		nrec := feedRecord{Feed: nf, State: rec.State, Dropped: rec.Dropped}
		if nf.Policy != f.Policy {
			nrec.State = nil
		}
		data, err := s.encodeRecord(&nrec)
		if err != nil {
			return err
		}
		_, err = s.defs.Update(ctx, feedKey(id), data, rev)
		if s.opt.Metrics.kvWrite(DefsBucket, err) == nil {
			s.announceChanged(id)
			return nil
		}
		if !IsConflict(err) {
			return err
		}
	}
	return ErrStale
}

// UpdatePipeFeed is Store.UpdatePipeFeed.
func (b *Backend) UpdatePipeFeed(p storage.Pipe, edit func(*storage.Feed) error) error {
	ctx, cancel := b.call()
	defer cancel()
	return b.s.UpdatePipeFeed(ctx, p, edit)
}
