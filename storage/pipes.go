package storage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// Limits on stored pipes.
const (
	// MaxPipeSize bounds a pipe record's JSON encoding: its definition
	// and its state (input cursors and operator states such as windows)
	// together.
	MaxPipeSize = 32 << 20
	// MaxPipeErrorLen bounds a pipe's LastError, in bytes. CreatePipe and
	// UpdatePipe refuse a longer one; CommitPipeRun shortens a longer
	// run error to it.
	MaxPipeErrorLen = 4096
)

// CreatePipe stores a new pipe and its output feed out, in one
// transaction. out must be of KindPipe with p's slug; it is created
// exactly as CreateFeed creates a feed (item count, slug index,
// validation). CreatePipe assigns p.ID (the next pipe sequence number),
// p.FeedID and out.ID (the next feed sequence number; IDs given are
// ignored), sets Created and Updated of both to Options.Now and gives an
// output feed without a Retention the store's default. p.Def
// must hold the definition (any JSON value; storage does not interpret
// it), p.State may be empty, and p's counters are stored as given.
//
// It fails with ErrInvalid (a bad slug, out not a pipe feed or under
// another slug, an empty or malformed definition, a record larger than
// MaxPipeSize), ErrPipeExists when another pipe has the slug, or
// ErrFeedExists when a pipe-kind feed outside any pipe has it; p and out
// are then left unchanged and nothing is written.
func (s *Store) CreatePipe(p *Pipe, out *Feed) error {
	if p == nil || out == nil {
		return fmt.Errorf("storage: create pipe: %w", invalidf("nil pipe or output feed"))
	}
	if out.Kind != KindPipe {
		return fmt.Errorf("storage: create pipe %q: %w", shortID(p.Slug),
			invalidf("output feed has kind %q, want %q", shortID(string(out.Kind)), KindPipe))
	}
	if out.Slug != p.Slug {
		return fmt.Errorf("storage: create pipe %q: %w", shortID(p.Slug),
			invalidf("output feed has slug %q, want the pipe's", shortID(out.Slug)))
	}
	now := s.now()
	nf, np := *out, *p
	nf.Created, nf.Updated = now, now
	s.withDefaultRetention(&nf)
	np.Created, np.Updated = now, now
	if _, err := validateFeed(&nf); err != nil {
		return fmt.Errorf("storage: create pipe %q: output feed: %w", shortID(p.Slug), err)
	}
	if _, err := validatePipe(&np); err != nil {
		return fmt.Errorf("storage: create pipe %q: %w", shortID(p.Slug), err)
	}
	err := s.dbUpdate(func(tx *bolt.Tx) error {
		pipes, err := bucket(tx, bucketPipes)
		if err != nil {
			return err
		}
		slugs, err := bucket(tx, bucketPipeSlug)
		if err != nil {
			return err
		}
		if v := slugs.Get([]byte(np.Slug)); v != nil {
			id, _ := getU64(v)
			return fmt.Errorf("%w: pipe %d has slug %q", ErrPipeExists, id, np.Slug)
		}
		feeds, err := bucket(tx, bucketFeeds)
		if err != nil {
			return err
		}
		if nf.ID, err = feeds.NextSequence(); err != nil {
			return err
		}
		if err := indexFeed(tx, &nf); err != nil {
			return err
		}
		if err := createFeedBuckets(tx, nf.ID); err != nil {
			return err
		}
		if err := s.putFeed(tx, &nf); err != nil {
			return err
		}
		if np.ID, err = pipes.NextSequence(); err != nil {
			return err
		}
		np.FeedID = nf.ID
		if err := putPipe(tx, &np); err != nil {
			return err
		}
		return slugs.Put([]byte(np.Slug), u64(np.ID))
	})
	if err != nil {
		return fmt.Errorf("storage: create pipe %q: %w", shortID(p.Slug), err)
	}
	*p, *out = np, nf
	return nil
}

// Pipe returns pipe id, or ErrPipeNotFound.
func (s *Store) Pipe(id uint64) (Pipe, error) {
	var p Pipe
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		p, err = getPipe(tx, id)
		return err
	})
	if err != nil {
		return Pipe{}, fmt.Errorf("storage: pipe %d: %w", id, err)
	}
	return p, nil
}

// PipeBySlug returns the pipe with this slug, or ErrPipeNotFound.
func (s *Store) PipeBySlug(slug string) (Pipe, error) {
	var p Pipe
	err := s.db.View(func(tx *bolt.Tx) error {
		slugs, err := bucket(tx, bucketPipeSlug)
		if err != nil {
			return err
		}
		if slug == "" || len(slug) > bolt.MaxKeySize {
			return ErrPipeNotFound
		}
		v := slugs.Get([]byte(slug))
		if v == nil {
			return ErrPipeNotFound
		}
		id, ok := getU64(v)
		if !ok {
			return corruptf("pipe_slug[%q] = %x", shortID(slug), v)
		}
		p, err = getPipe(tx, id)
		if errors.Is(err, ErrPipeNotFound) {
			return corruptf("pipe_slug[%q] = %d: no such pipe", shortID(slug), id)
		}
		return err
	})
	if err != nil {
		return Pipe{}, fmt.Errorf("storage: pipe with slug %q: %w", shortID(slug), err)
	}
	return p, nil
}

// Pipes returns all pipes in order of ID.
func (s *Store) Pipes() ([]Pipe, error) {
	var out []Pipe
	err := s.db.View(func(tx *bolt.Tx) error {
		b, err := bucket(tx, bucketPipes)
		if err != nil {
			return err
		}
		return b.ForEach(func(k, v []byte) error {
			p, err := decodePipe(k, v)
			if err != nil {
				return err
			}
			out = append(out, p)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("storage: pipes: %w", err)
	}
	return out, nil
}

// UpdatePipe replaces the definition (Def), the state (State; nil clears
// it) and the counters (Runs, LastRun, LastError, ErrorCount) of the
// stored pipe p.ID with p's, and sets Updated to Options.Now. FeedID and
// Created are kept. A changed Slug moves the pipe's slug index entry and
// renames its output feed (with the feed's slug index entry) in the same
// transaction. It fails with ErrPipeNotFound, ErrInvalid (as CreatePipe),
// ErrPipeExists when another pipe has the new slug, or ErrFeedExists when
// a pipe-kind feed outside any pipe has it; nothing is changed then.
//
// The state and counters written are p's: a caller that read p with Pipe
// must keep the pipe from running (CommitPipeRun) until UpdatePipe
// returns, or the run's state and counters are overwritten. The runner
// holds the pipe's run lock for that.
func (s *Store) UpdatePipe(p Pipe) error { return s.UpdatePipeFeed(p, nil) }

// UpdatePipeFeed is UpdatePipe that also applies edit (when not nil) to
// the pipe's output feed, after any rename, in the same transaction: a new
// title or new formats never lag behind the definition that set them.
// edit may not change the feed's kind or slug (ErrInvalid); an error it
// returns is returned and nothing is changed.
func (s *Store) UpdatePipeFeed(p Pipe, edit func(*Feed) error) error {
	err := s.dbUpdate(func(tx *bolt.Tx) error {
		old, err := getPipe(tx, p.ID)
		if err != nil {
			return err
		}
		np := old
		np.Slug, np.Def, np.State = p.Slug, p.Def, p.State
		np.Runs, np.LastRun, np.LastError, np.ErrorCount = p.Runs, p.LastRun, p.LastError, p.ErrorCount
		np.Updated = s.now()
		if _, err := validatePipe(&np); err != nil {
			return err
		}
		if np.Slug != old.Slug {
			if err := reslugPipe(tx, &old, &np); err != nil {
				return err
			}
			if _, err := s.updateFeedTx(tx, old.FeedID, func(f *Feed) error {
				if f.Kind != KindPipe || f.Slug != old.Slug {
					return corruptf("pipe %d: output feed %d is %s feed %q", old.ID, f.ID, f.Kind, shortID(f.Slug))
				}
				f.Slug = np.Slug
				return nil
			}); errors.Is(err, ErrFeedNotFound) {
				return corruptf("pipe %d: output feed %d missing", old.ID, old.FeedID)
			} else if err != nil {
				return err
			}
		}
		if edit != nil {
			if _, err := s.updateFeedTx(tx, old.FeedID, func(f *Feed) error {
				if err := edit(f); err != nil {
					return err
				}
				if f.Kind != KindPipe || f.Slug != np.Slug {
					return fmt.Errorf("%w: the output feed of pipe %d must stay a pipe feed named %q", ErrInvalid, np.ID, np.Slug)
				}
				return nil
			}); err != nil {
				return err
			}
		}
		return putPipe(tx, &np)
	})
	if err != nil {
		return fmt.Errorf("storage: update pipe %d: %w", p.ID, err)
	}
	return nil
}

// reslugPipe moves a pipe's slug index entry from old.Slug to np.Slug.
func reslugPipe(tx *bolt.Tx, old, np *Pipe) error {
	slugs, err := bucket(tx, bucketPipeSlug)
	if err != nil {
		return err
	}
	if v := slugs.Get([]byte(np.Slug)); v != nil {
		if id, _ := getU64(v); id != np.ID {
			return fmt.Errorf("%w: pipe %d has slug %q", ErrPipeExists, id, np.Slug)
		}
	}
	if v := slugs.Get([]byte(old.Slug)); bytes.Equal(v, u64(old.ID)) {
		if err := slugs.Delete([]byte(old.Slug)); err != nil {
			return err
		}
	}
	return slugs.Put([]byte(np.Slug), u64(np.ID))
}

// SavePipeState replaces the state of pipe id (nil clears it), or fails
// with ErrPipeNotFound, or ErrInvalid when state is not valid JSON or
// makes the record larger than MaxPipeSize. Updated is not changed: it
// says when the definition last changed. A runner saves state together
// with the run's output with CommitPipeRun instead; SavePipeState is for
// state that changes without output (e.g. a reset).
func (s *Store) SavePipeState(id uint64, state json.RawMessage) error {
	err := s.dbUpdate(func(tx *bolt.Tx) error {
		p, err := getPipe(tx, id)
		if err != nil {
			return err
		}
		p.State = state
		return putPipe(tx, &p)
	})
	if err != nil {
		return fmt.Errorf("storage: save state of pipe %d: %w", id, err)
	}
	return nil
}

// DeletePipe removes pipe id, its slug index entry and its output feed
// with all the feed's items and observations, in one transaction, or
// fails with ErrPipeNotFound. A pipe whose output feed is already gone is
// removed all the same.
func (s *Store) DeletePipe(id uint64) error {
	err := s.dbUpdate(func(tx *bolt.Tx) error {
		p, err := getPipe(tx, id)
		if err != nil {
			return err
		}
		slugs, err := bucket(tx, bucketPipeSlug)
		if err != nil {
			return err
		}
		if v := slugs.Get([]byte(p.Slug)); bytes.Equal(v, u64(id)) {
			if err := slugs.Delete([]byte(p.Slug)); err != nil {
				return err
			}
		}
		pipes, err := bucket(tx, bucketPipes)
		if err != nil {
			return err
		}
		if err := pipes.Delete(u64(id)); err != nil {
			return err
		}
		return s.deleteFeedTx(tx, p.FeedID)
	})
	if err != nil {
		return fmt.Errorf("storage: delete pipe %d: %w", id, err)
	}
	return nil
}

// deleteFeedTx removes feed id, its index entry and its data, if
// it exists.
func (s *Store) deleteFeedTx(tx *bolt.Tx, id uint64) error {
	f, err := getFeed(tx, id)
	if errors.Is(err, ErrFeedNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	if err := s.unindexFeed(tx, &f); err != nil {
		return err
	}
	feeds, err := bucket(tx, bucketFeeds)
	if err != nil {
		return err
	}
	if err := feeds.Delete(u64(id)); err != nil {
		return err
	}
	if err := feeds.Delete(tailKey(id)); err != nil {
		return err
	}
	return deleteFeedData(tx, id)
}

// CommitPipeRun records one run of pipe pipeID: its output, its new state
// and its outcome, in ONE transaction. This makes a run atomic: the output
// items and the state that says which input the run consumed (input
// cursors, operator states) commit together or not at all, so a crash
// between runs never loses output (state advanced, items missing) nor
// duplicates it (items stored, state not advanced, inputs read again).
//
// When run.Err is empty (a successful run), out is added to the pipe's
// output feed exactly as AddItems adds items (validation, deduplication
// by ID, Seq assignment, retention and the Reducer), state replaces the
// stored state (nil leaves it as it is), Runs is incremented, LastRun set
// to run.At, LastError cleared and ErrorCount reset to 0. The items
// actually added are returned, as AddItems returns them.
//
// When run.Err is not empty (a failed run), out and state are ignored:
// no item is added and the state is kept, so the next run starts from the
// same input. Runs is incremented, LastRun set to run.At, LastError to
// run.Err (shortened to MaxPipeErrorLen bytes) and ErrorCount
// incremented.
//
// Unlike AddItems, an invalid item (or an update that would make a stored
// item larger than MaxItemSize) fails the whole commit: nothing is
// written, the counters and state are unchanged, and the error joins one
// *ItemError per refused item (each wraps ErrInvalid). The runner should
// then record the run as failed. As in AddItems, an error of the Reducer
// does not undo the commit: it is returned with the added items. It also
// fails with ErrPipeNotFound, ErrInvalid for a state that is not JSON or
// too large, and ErrCorrupt when the output feed is missing.
//
// Updated is not changed (it says when the definition last changed).
func (s *Store) CommitPipeRun(pipeID uint64, state json.RawMessage, out []Item, run PipeRun) (added []Item, err error) {
	now := s.now()
	ok := run.Err == ""
	if ok && len(state) > MaxPipeSize {
		return nil, fmt.Errorf("storage: commit run of pipe %d: %w", pipeID,
			invalidf("state is %d bytes, more than %d", len(state), MaxPipeSize))
	}
	if ok && state != nil && !json.Valid(state) {
		return nil, fmt.Errorf("storage: commit run of pipe %d: %w", pipeID, invalidf("state is not valid JSON"))
	}
	var res addResult
	txErr := s.dbUpdate(func(tx *bolt.Tx) error {
		p, err := getPipe(tx, pipeID)
		if err != nil {
			return err
		}
		p.Runs++
		p.LastRun = run.At
		if !ok {
			p.LastError = truncateUTF8(run.Err, MaxPipeErrorLen)
			p.ErrorCount++
			return putPipe(tx, &p)
		}
		p.LastError, p.ErrorCount = "", 0
		if state != nil {
			p.State = state
		}
		if f, err := getFeed(tx, p.FeedID); errors.Is(err, ErrFeedNotFound) {
			return corruptf("pipe %d: output feed %d missing", pipeID, p.FeedID)
		} else if err != nil {
			return err
		} else if f.Kind != KindPipe {
			return corruptf("pipe %d: output feed %d is a %s feed", pipeID, p.FeedID, f.Kind)
		}
		// Items are validated here, once the output feed's id (part of
		// their encoding) is known.
		valid, errs := prepareItems(p.FeedID, out, now)
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
		res, err = s.addItemsTx(tx, p.FeedID, valid, now)
		if err != nil {
			return err
		}
		if len(res.updateErrs) > 0 {
			return errors.Join(res.updateErrs...)
		}
		return putPipe(tx, &p)
	})
	if txErr != nil {
		return nil, fmt.Errorf("storage: commit run of pipe %d: %w", pipeID, txErr)
	}
	return res.added, res.retErr
}

// TruncateUTF8 shortens s to at most n bytes without splitting a UTF-8
// sequence, as the stores shorten a pipe's last error.
func TruncateUTF8(s string, n int) string { return truncateUTF8(s, n) }

func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 {
		r, size := utf8.DecodeLastRuneInString(s)
		if r != utf8.RuneError || size > 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s
}

// validatePipe checks a pipe before it is written and returns its JSON.
func validatePipe(p *Pipe) ([]byte, error) {
	if err := validateSlug(p.Slug); err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(p.Def)) == 0 {
		return nil, invalidf("pipe %q without definition", shortID(p.Slug))
	}
	if len(p.LastError) > MaxPipeErrorLen {
		return nil, invalidf("last error is %d bytes, more than %d", len(p.LastError), MaxPipeErrorLen)
	}
	if p.Runs < 0 || p.ErrorCount < 0 {
		return nil, invalidf("negative counters")
	}
	if n := len(p.Def) + len(p.State); n > MaxPipeSize {
		// Refused before the (costly) encoding.
		return nil, invalidf("definition and state are %d bytes, more than %d", n, MaxPipeSize)
	}
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, invalidf("pipe cannot be encoded: %v", err)
	}
	if len(raw) > MaxPipeSize {
		return nil, invalidf("pipe record is %d bytes, more than %d", len(raw), MaxPipeSize)
	}
	return raw, nil
}

func getPipe(tx *bolt.Tx, id uint64) (Pipe, error) {
	pipes, err := bucket(tx, bucketPipes)
	if err != nil {
		return Pipe{}, err
	}
	k := u64(id)
	v := pipes.Get(k)
	if v == nil {
		return Pipe{}, ErrPipeNotFound
	}
	return decodePipe(k, v)
}

func decodePipe(k, v []byte) (Pipe, error) {
	var p Pipe
	if err := json.Unmarshal(v, &p); err != nil {
		return Pipe{}, corruptf("pipe record %x: %v", k, err)
	}
	if id, _ := getU64(k); p.ID != id {
		return Pipe{}, corruptf("pipe record %x holds id %d", k, p.ID)
	}
	return p, nil
}

func putPipe(tx *bolt.Tx, p *Pipe) error {
	raw, err := validatePipe(p)
	if err != nil {
		return err
	}
	pipes, err := bucket(tx, bucketPipes)
	if err != nil {
		return err
	}
	return pipes.Put(u64(p.ID), raw)
}
