package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// DefaultLockTimeout is how long Open waits for a data file held by another
// process when Options.LockTimeout is zero.
const DefaultLockTimeout = time.Second

// DefaultMaxObservations is how many observations per feed are kept when
// Options.MaxObservations is zero: as many as the web UI charts.
const DefaultMaxObservations = 500

// DefaultRetention is the default retention of a node's new remote and
// pipe feeds, for Options.DefaultRetention: their newest 200 items (by
// publish time), about a week of an hourly feed. With
// DefaultMaxObservations, such a feed then holds at most 200 items and
// 500 observations, which bounds its share of the data file (see the
// README for the disk a node of many feeds needs).
var DefaultRetention = Retention{MaxItems: 200}

// Options configure a Store. The zero value is ready to use.
type Options struct {
	// LockTimeout bounds the wait for a data file held by another process;
	// Open then fails with ErrLocked. Zero means DefaultLockTimeout.
	LockTimeout time.Duration
	// NoSync skips fsync after each commit. Only for tests and benchmarks:
	// a crash may lose or corrupt acknowledged writes.
	NoSync bool
	// Now stamps Created, Updated and Fetched and is the reference of
	// Retention.MaxAge. Nil means time.Now.
	Now func() time.Time
	// MaxObservations is how many observations are kept per feed (the
	// newest). Zero means DefaultMaxObservations. The data file holds up
	// to an eighth more (at most 64), dropped a batch at a time so that a
	// poll does not rewrite the oldest page; reads never return them.
	MaxObservations int
	// DefaultRetention is the Retention CreateFeed and CreatePipe give a
	// remote or pipe feed created without one (zero Retention); a feed's
	// own Retention, and UpdateFeed, override it. Sensor feeds never get
	// it: their readings are kept nowhere else, so they keep every item
	// unless given a Retention of their own. Zero (or a negative
	// MaxItems) means none: such feeds keep every item. A node of many
	// feeds sets it to the package's DefaultRetention, or its own bound.
	DefaultRetention Retention
	// CommitLinger is how long a group commit may wait for more writes
	// while they keep arriving, when the last group already carried more
	// than one (see committer). Zero means DefaultCommitLinger; negative,
	// never.
	CommitLinger time.Duration
}

// DefaultCommitLinger is Options.CommitLinger's default.
const DefaultCommitLinger = 2 * time.Millisecond

// Store is slogfeed's data file. It is safe for concurrent use: reads run
// in parallel, writes are serialised by bbolt, and every method is one
// transaction, durable when it returns (unless Options.NoSync). The hot
// writes (AddItems, RecordPoll, RecordFetch, AddObservation) of concurrent
// callers share one transaction and one fsync (group commit, commit.go);
// each stays atomic on its own.
type Store struct {
	db     *bolt.DB
	path   string
	now    func() time.Time
	maxObs int
	linger time.Duration // Options.CommitLinger, 0 for never
	// retention is what a feed created without a Retention gets
	// (Options.DefaultRetention).
	retention Retention
	reducer   atomic.Pointer[reducerBox]
	learner   atomic.Pointer[learnerBox] // folds observations into policy states (policystate.go)
	commit    committer                  // group commit of the hot writes (commit.go)
	unstored  Unstored                   // feeds whose polls cannot be stored (unstored.go)
	// summaries caches every feed's summary for lists (summaries.go).
	summaries summaryCache
	// feedMemo hands the feeds Store.Feed decoded to the writes that
	// follow, and the feeds the polls' writes stored to the next
	// Store.Feed (feedmemo.go).
	feedMemo feedMemo
	// feedGen counts the write transactions other than the polls' (see
	// updatePoll) that have ended: a memo entry a poll's write stored is
	// current while the count is the one its write began with, so
	// Store.Feed returns it without a transaction (feedmemo.go).
	feedGen atomic.Uint64
}

type reducerBox struct{ r Reducer }

// Open opens the data file at path, creating it (mode 0600, parent
// directories 0700) when it does not exist, and brings its schema up to
// date. It fails with ErrLocked when another process holds the file,
// ErrSchemaTooNew when a newer slogfeed wrote it, and ErrCorrupt when it is
// not a slogfeed data file.
func Open(path string, opt Options) (*Store, error) {
	return open(path, opt, migrations)
}

func open(path string, opt Options, migs []migration) (*Store, error) {
	if path == "" {
		return nil, fmt.Errorf("storage: open: %w: empty path", ErrInvalid)
	}
	if opt.LockTimeout <= 0 {
		opt.LockTimeout = DefaultLockTimeout
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.MaxObservations <= 0 {
		opt.MaxObservations = DefaultMaxObservations
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("storage: open %s: %w", path, err)
	}
	// The free-page list is not written at each commit (bbolt rebuilds
	// it by a scan when the file is opened): a commit writes only the
	// pages it changed, and the list, which grows with the file, is not
	// rewritten by every group commit. The map form frees and allocates
	// pages in constant time.
	db, err := openBolt(path, &bolt.Options{Timeout: opt.LockTimeout, NoSync: opt.NoSync,
		NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	switch {
	case errors.Is(err, bolterrors.ErrTimeout):
		return nil, fmt.Errorf("storage: data file %s is in use by another slogfeed process (waited %s): %w",
			path, opt.LockTimeout, ErrLocked)
	case errors.Is(err, bolterrors.ErrInvalid), errors.Is(err, bolterrors.ErrVersionMismatch),
		errors.Is(err, bolterrors.ErrChecksum), errors.Is(err, ErrCorrupt):
		return nil, fmt.Errorf("storage: open %s: %w (%v)", path, ErrCorrupt, err)
	case err != nil:
		return nil, fmt.Errorf("storage: open %s: %w", path, err)
	}
	if err := migrate(db, migs); err != nil {
		db.Close()
		return nil, err
	}
	linger := opt.CommitLinger
	if linger == 0 {
		linger = DefaultCommitLinger
	}
	st := &Store{db: db, path: path, now: opt.Now, maxObs: opt.MaxObservations, linger: max(linger, 0),
		retention: defaultRetention(opt.DefaultRetention)}
	st.feedGen.Store(1) // 0 marks a memo entry as not known current
	return st, nil
}

// openBolt opens the bbolt file, turning a panic of bbolt on a damaged file
// into ErrCorrupt.
func openBolt(path string, opt *bolt.Options) (db *bolt.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, corruptf("%v", r)
		}
	}()
	return bolt.Open(path, 0o600, opt)
}

// Close closes the data file, waiting for running transactions to end.
// It stores the file's free list first (saveFreelist).
func (s *Store) Close() error {
	s.saveFreelist()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("storage: close %s: %w", s.path, err)
	}
	return nil
}

// saveFreelist writes the free list of the file's pages with one last
// transaction. The commits of a running store do not write it
// (NoFreelistSync: that would rewrite its pages at every group commit),
// so an Open after a crash finds it missing and rebuilds it by walking
// every page of the file, which takes about 3 s a GiB; an Open after
// Close reads it instead. The next commit drops it again (and frees its
// pages), so a crash after that rebuilds it as before.
func (s *Store) saveFreelist() {
	if s.db.IsReadOnly() {
		return
	}
	_ = s.dbUpdate(func(tx *bolt.Tx) error {
		// Under the writer's lock: every commit reads the setting there.
		tx.DB().NoFreelistSync = false
		return nil
	})
}

// InUse returns the bytes of the data file's pages that hold data: its
// size less its free pages. Unlike Size, which only grows until a
// compaction, it follows what is stored.
func (s *Store) InUse() (int64, error) {
	var n int64
	err := s.db.View(func(tx *bolt.Tx) error {
		st := s.db.Stats()
		n = tx.Size() - int64(st.FreePageN+st.PendingPageN)*int64(s.db.Info().PageSize)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("storage: bytes in use: %w", err)
	}
	return n, nil
}

// Path returns the data file's path.
func (s *Store) Path() string { return s.path }

// SetReducer installs r as the retention reducer (nil removes it). See
// Reducer and ApplyRetention.
func (s *Store) SetReducer(r Reducer) {
	if r == nil {
		s.reducer.Store(nil)
		return
	}
	s.reducer.Store(&reducerBox{r})
}

func (s *Store) currentReducer() Reducer {
	if b := s.reducer.Load(); b != nil {
		return b.r
	}
	return nil
}

// Size returns how many bytes of the data file are in use (its pages up to
// the highest one written; the file itself grows ahead of it in steps).
func (s *Store) Size() (int64, error) {
	var n int64
	err := s.db.View(func(tx *bolt.Tx) error {
		n = tx.Size()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("storage: size: %w", err)
	}
	return n, nil
}

// defaultRetention is the Retention new feeds get under opt
// (Options.DefaultRetention).
func defaultRetention(opt Retention) Retention {
	if opt.MaxItems < 0 {
		return Retention{}
	}
	return opt
}

// withDefaultRetention gives f the store's default Retention when it has
// none and is not a sensor feed.
func (s *Store) withDefaultRetention(f *Feed) {
	if f.Retention == (Retention{}) && f.Kind != KindSensor {
		f.Retention = s.retention
	}
}
