package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/volume"
)

var _ store.Volumes = (*Store)(nil)

const volumeColumns = `id, team, name, node, size_mb, created_at`

func scanVolume(r pgx.CollectableRow) (volume.Volume, error) {
	var v volume.Volume
	err := r.Scan(&v.ID, &v.Team, &v.Name, &v.Node, &v.SizeMB, &v.CreatedAt)
	v.CreatedAt = v.CreatedAt.UTC()
	return v, err
}

// AddVolume implements store.Volumes.
func (s *Store) AddVolume(ctx context.Context, v volume.Volume) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO volumes (`+volumeColumns+`) VALUES ($1, $2, $3, $4, $5, $6)`,
		v.ID, v.Team, v.Name, v.Node, v.SizeMB, v.CreatedAt)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" { // unique_violation
		return errs.New(errs.AlreadyExists, "volume %q already exists", v.Name)
	}
	if err != nil {
		return fmt.Errorf("record volume %s: %w", v.ID, err)
	}
	return nil
}

// volumes runs a query of volume rows.
func (s *Store) volumes(ctx context.Context, what, query string, args ...any) ([]volume.Volume, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+volumeColumns+` FROM volumes `+query, args...)
	if err == nil {
		var out []volume.Volume
		if out, err = pgx.CollectRows(rows, scanVolume); err == nil {
			return out, nil
		}
	}
	return nil, fmt.Errorf("%s: %w", what, err)
}

// one is the single volume a query finds (NotFound naming ref without).
func one(vs []volume.Volume, err error, ref string) (volume.Volume, error) {
	if err != nil {
		return volume.Volume{}, err
	}
	if len(vs) == 0 {
		return volume.Volume{}, errs.New(errs.NotFound, "volume %q not found", ref)
	}
	return vs[0], nil
}

// Volume implements store.Volumes.
func (s *Store) Volume(ctx context.Context, team, ref string) (volume.Volume, error) {
	vs, err := s.volumes(ctx, "read volume", `WHERE team = $1 AND (id = $2 OR name = $2) ORDER BY id = $2 DESC LIMIT 1`, team, ref)
	return one(vs, err, ref)
}

// VolumeByID implements store.Volumes.
func (s *Store) VolumeByID(ctx context.Context, id string) (volume.Volume, error) {
	vs, err := s.volumes(ctx, "read volume", `WHERE id = $1`, id)
	return one(vs, err, id)
}

// TeamVolumes implements store.Volumes.
func (s *Store) TeamVolumes(ctx context.Context, team string) ([]volume.Volume, error) {
	return s.volumes(ctx, "list volumes", `WHERE team = $1 ORDER BY created_at, id`, team)
}

// NodeVolumes implements store.Volumes.
func (s *Store) NodeVolumes(ctx context.Context, node string) ([]volume.Volume, error) {
	return s.volumes(ctx, "list a node's volumes", `WHERE node = $1 ORDER BY created_at, id`, node)
}

// RemoveVolume implements store.Volumes.
func (s *Store) RemoveVolume(ctx context.Context, team, ref string) (volume.Volume, error) {
	rows, err := s.pool.Query(ctx, `DELETE FROM volumes WHERE id = (SELECT id FROM volumes
		WHERE team = $1 AND (id = $2 OR name = $2) ORDER BY id = $2 DESC LIMIT 1) RETURNING `+volumeColumns, team, ref)
	if err != nil {
		return volume.Volume{}, fmt.Errorf("delete volume: %w", err)
	}
	vs, err := pgx.CollectRows(rows, scanVolume)
	if err != nil {
		err = fmt.Errorf("delete volume: %w", err)
	}
	return one(vs, err, ref)
}
