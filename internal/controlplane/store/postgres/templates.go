package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/template"
)

var _ template.Records = (*Store)(nil)

// Generation implements template.Records.
func (s *Store) Generation(ctx context.Context) (int64, error) {
	var gen int64
	if err := s.pool.QueryRow(ctx, `SELECT generation FROM templates_generation`).Scan(&gen); err != nil {
		return 0, fmt.Errorf("read the templates' generation: %w", err)
	}
	return gen, nil
}

// Templates implements template.Records.
func (s *Store) Templates(ctx context.Context) ([]template.Record, error) {
	rows, err := s.pool.Query(ctx, `SELECT version, record FROM templates`)
	if err != nil {
		return nil, fmt.Errorf("list templates: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (template.Record, error) {
		var r template.Record
		var raw []byte
		if err := row.Scan(&r.Version, &raw); err != nil {
			return r, err
		}
		err := json.Unmarshal(raw, &r)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("list templates: %w", err)
	}
	return out, nil
}

// PutTemplate implements template.Records: in one transaction, the record
// if it is still at r.Version, and the generation.
func (s *Store) PutTemplate(ctx context.Context, r template.Record) (int64, error) {
	raw, err := json.Marshal(r)
	if err != nil {
		return 0, err
	}
	var version int64
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var tag interface{ RowsAffected() int64 }
		if r.Version == 0 {
			t, err := tx.Exec(ctx, `INSERT INTO templates (id, version, record) VALUES ($1, 1, $2) ON CONFLICT (id) DO NOTHING`, r.ID, raw)
			tag, version = t, 1
			if err != nil {
				return err
			}
		} else {
			t, err := tx.Exec(ctx, `UPDATE templates SET version = version + 1, record = $2 WHERE id = $1 AND version = $3`, r.ID, raw, r.Version)
			tag, version = t, r.Version+1
			if err != nil {
				return err
			}
		}
		if tag.RowsAffected() == 0 {
			return errs.New(errs.Conflict, "template %s was changed meanwhile", r.ID)
		}
		_, err := tx.Exec(ctx, `UPDATE templates_generation SET generation = generation + 1`)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("save template %s: %w", r.ID, err)
	}
	return version, nil
}

// DeleteTemplate implements template.Records.
func (s *Store) DeleteTemplate(ctx context.Context, id string) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM templates WHERE id = $1`, id); err != nil {
			return fmt.Errorf("delete template %s: %w", id, err)
		}
		_, err := tx.Exec(ctx, `UPDATE templates_generation SET generation = generation + 1`)
		return err
	})
}
