package template

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"time"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/logx"
)

// Records keep a store's template records where other processes share
// them (a cluster's database: its API replicas and nodes); a store without
// them keeps its records in files of its own.
type Records interface {
	// Generation changes whenever a record does.
	Generation(ctx context.Context) (int64, error)
	// Templates returns every record, each with its Version.
	Templates(ctx context.Context) ([]Record, error)
	// PutTemplate stores r if the stored one is still at r.Version (0: no
	// record yet) and returns its new version; else errs.Conflict.
	PutTemplate(ctx context.Context, r Record) (int64, error)
	DeleteTemplate(ctx context.Context, id string) error
}

// recordsTimeout bounds a read or write of shared records.
const recordsTimeout = 10 * time.Second

// errChanged: another process saved the record first.
var errChanged = errs.New(errs.Conflict, "the template was changed by another process at the same time")

// UseRecords makes the store keep its records in shared (the files of
// its own are left alone) and fails the builds node left unfinished (a
// node that stopped during them). Call it before the store is used.
func (s *Store) UseRecords(ctx context.Context, shared Records, node string) error {
	s.mu.Lock()
	s.shared, s.gen, s.node = shared, -1, node
	err := s.sync()
	type ofTemplate struct {
		templateID string
		build      Build
	}
	var unfinished []ofTemplate
	for _, r := range s.templates {
		for _, b := range r.Builds {
			if node != "" && b.Node == node && b.Unfinished() {
				unfinished = append(unfinished, ofTemplate{r.ID, *b})
			}
		}
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	for _, u := range unfinished {
		u.build.Status, u.build.Reason, u.build.FinishedAt = StatusError, "the node stopped during the build", time.Now().UTC()
		if err := s.SetBuild(u.templateID, u.build); err != nil {
			return err
		}
	}
	return nil
}

// lock takes the store's lock with its records fresh: a shared store
// reads again what other processes changed. On error it is not held.
func (s *Store) lock() error {
	s.mu.Lock()
	if err := s.sync(); err != nil {
		s.mu.Unlock()
		return err
	}
	return nil
}

// Generation is the generation of the shared records this store holds,
// read again first: what it counts (TeamLayerBytes) reflects that
// generation or a later one.
func (s *Store) Generation() (int64, error) {
	if err := s.lock(); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	return s.gen, nil
}

// lockStale takes the store's lock for a read that cannot fail: records
// that cannot be read again are served as last read.
func (s *Store) lockStale() {
	s.mu.Lock()
	if err := s.sync(); err != nil {
		s.log.Warn("read the templates' records", logx.Err(err))
	}
}

// sync reads the shared records again when they changed (under s.mu).
func (s *Store) sync() error {
	if s.shared == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), recordsTimeout)
	defer cancel()
	gen, err := s.shared.Generation(ctx)
	if err != nil {
		return fmt.Errorf("read the templates' records: %w", err)
	}
	if gen == s.gen {
		return nil
	}
	all, err := s.shared.Templates(ctx)
	if err != nil {
		return fmt.Errorf("read the templates' records: %w", err)
	}
	s.templates = maps.Clone(s.builtin)
	for i := range all {
		s.templates[all[i].ID] = &all[i]
	}
	s.gen = gen
	s.stale = true // a build may have lost layers elsewhere
	return nil
}

// retry runs change again, on fresh records, while another process saves
// the record it changes first: up to 10 times, each after a random wait
// that grows with the tries, so that writers racing for one record (a
// cluster's replicas tagging it at once) spread out rather than collide
// again at once.
func retry[T any](change func() (T, error)) (T, error) {
	for tries := 1; ; tries++ {
		v, err := change()
		if !errors.Is(err, errChanged) || tries == 10 {
			return v, err
		}
		time.Sleep(time.Duration(rand.Int64N(int64(tries) * int64(5*time.Millisecond))))
	}
}

// put saves a record in the shared records (under s.mu).
func (s *Store) put(r *Record) error {
	ctx, cancel := context.WithTimeout(context.Background(), recordsTimeout)
	defer cancel()
	v, err := s.shared.PutTemplate(ctx, *r)
	if errs.Is(err, errs.Conflict) {
		s.gen = -1 // what is in memory is not what is stored
		return errChanged
	}
	if err != nil {
		s.gen = -1
		return fmt.Errorf("save template %s: %w", r.ID, err)
	}
	r.Version = v
	return nil
}

// FetchLayers fetches the layers this node lacks from the remote, each by
// its archive's digest in blobs (every one must be named there).
func (s *Store) FetchLayers(ctx context.Context, layers []string, blobs map[string]string) error {
	if s.remote == nil {
		return errs.New(errs.Unavailable, "this node has no object store to fetch layers from")
	}
	for _, l := range layers {
		if blobs[l] == "" {
			return errs.New(errs.InvalidArgument, "layer %s: no archive named", l)
		}
	}
	return s.fetch(ctx, layers, blobs)
}

// fetch fetches the layers this node lacks from the remote, by their
// archives' digests. A layer never pushed is left to the checks of the
// one who stacks it (a saved layer's manifest, the driver's mount).
func (s *Store) fetch(ctx context.Context, layers []string, blobs map[string]string) error {
	if s.remote == nil { // one host: nothing to fetch, nothing to stat on a create
		return nil
	}
	for _, l := range layers {
		if blobs[l] == "" || s.layers.Has(l) {
			continue
		}
		start := time.Now()
		if err := s.pullLayer(ctx, l, blobs[l]); err != nil {
			return err
		}
		s.log.Info("layer fetched from the object store", "layer", l, "took", time.Since(start).Round(time.Millisecond))
	}
	return nil
}
