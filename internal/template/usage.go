package template

import (
	"fmt"
	"io/fs"
	"path/filepath"
)

// TeamLayerBytes is how much storage a team's templates hold: the bytes
// of every layer their builds name, each layer once, shared with other
// teams or not, and of their snapshots' copies of processes. A snapshot's
// layer that this process does not hold (an API replica's, in the object
// store) counts as its record says.
func (s *Store) TeamLayerBytes(team string) (int64, error) {
	if err := s.lock(); err != nil {
		return 0, err
	}
	names, recorded := map[string]bool{}, map[string]int64{}
	var total int64
	for _, r := range s.templates {
		if r.Team != team {
			continue
		}
		for _, b := range r.Builds {
			for _, l := range b.Image.Layers {
				names[l] = true
			}
			if b.Snapshot == nil {
				continue
			}
			recorded[b.Snapshot.Layer.Name] = b.Snapshot.Layer.Bytes
			if b.Snapshot.Image != nil {
				total += b.Snapshot.Image.Bytes()
			}
		}
	}
	s.mu.Unlock()
	for name := range names {
		n, err := s.layerBytes(name)
		if err != nil {
			return 0, err
		}
		if n == 0 {
			n = recorded[name]
		}
		total += n
	}
	return total, nil
}

// layerBytes is the size of a layer's files, counted once: a stored layer
// never changes.
func (s *Store) layerBytes(name string) (int64, error) {
	s.sizesMu.Lock()
	n, ok := s.sizes[name]
	s.sizesMu.Unlock()
	if ok {
		return n, nil
	}
	if s.remote != nil && !s.layers.Has(name) {
		return 0, nil // in the object store only: this process does not count it
	}
	err := filepath.WalkDir(s.layers.Path(name), func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("size of layer %s: %w", name, err)
	}
	s.sizesMu.Lock()
	s.sizes[name] = n
	s.sizesMu.Unlock()
	return n, nil
}
