// Package postgres is the store of a cluster's API replicas: PostgreSQL
// through pgx, its schema kept by goose migrations. Every statement is one
// transaction of its own; replicas share nothing else.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/sandboxes"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store implements store.Store.
type Store struct {
	pool   *pgxpool.Pool
	limits store.Limits
}

var _ store.Store = (*Store)(nil)

// Open connects to the database dsn names (a URL or key=value pairs, as
// libpq takes them) and migrates its schema. Replicas starting together
// migrate one at a time (goose holds a session lock).
func Open(ctx context.Context, dsn string) (*Store, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, errs.Mark(errs.Unavailable, fmt.Errorf("postgres: %w", err))
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return &Store{pool: pool, limits: store.DefaultLimits}, nil
}

// SetLimits implements store.Store.
func (s *Store) SetLimits(l store.Limits) { s.limits = l.OrDefault() }

func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	dir, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return err
	}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	// Replicas starting together wait for the first one's migration: asked
	// for every second, up to five minutes.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 300))
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, dir, goose.WithSessionLocker(locker))
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// Close implements store.Store.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Secret implements store.Store: the first replica to store a value wins,
// and every replica returns that one.
func (s *Store) Secret(ctx context.Context, name string, gen func() ([]byte, error)) ([]byte, error) {
	var v []byte
	err := s.pool.QueryRow(ctx, `SELECT value FROM secrets WHERE name = $1`, name).Scan(&v)
	if err == nil {
		return v, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("read secret %s: %w", name, err)
	}
	if v, err = gen(); err != nil {
		return nil, err
	}
	err = s.pool.QueryRow(ctx, `INSERT INTO secrets (name, value) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET name = excluded.name RETURNING value`, name, v).Scan(&v)
	if err != nil {
		return nil, fmt.Errorf("store secret %s: %w", name, err)
	}
	return v, nil
}

// InsertSandbox implements store.Store.
func (s *Store) InsertSandbox(ctx context.Context, sb store.Sandbox) error {
	if sb.Answer == nil {
		return insertSandbox(ctx, s.pool, sb)
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return insertSandbox(ctx, tx, sb) })
}

var _ store.Admitting = (*Store)(nil)

// InsertSandboxAdmitted implements store.Admitting: the team's creates
// take a transaction's lock of their own, so that two replicas' creates
// never both pass the quota.
func (s *Store) InsertSandboxAdmitted(ctx context.Context, sb store.Sandbox, admit func(store.TeamUse) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('cove-team:' || $1))`, sb.Team); err != nil {
			return fmt.Errorf("lock team %s: %w", sb.Team, err)
		}
		var use store.TeamUse
		if err := tx.QueryRow(ctx, `SELECT count(*), coalesce(sum(cpu_count), 0), coalesce(sum(memory_mb), 0), coalesce(sum(disk_mb), 0)
			FROM sandboxes WHERE team = $1`, sb.Team).Scan(&use.Sandboxes, &use.CPUs, &use.MemoryMB, &use.DiskMB); err != nil {
			return fmt.Errorf("team %s's sandboxes: %w", sb.Team, err)
		}
		if err := admit(use); err != nil {
			return err
		}
		return insertSandbox(ctx, tx, sb)
	})
}

// SetSandboxSizeAdmitted implements store.Admitting, under the same lock
// of the team's as its creates.
func (s *Store) SetSandboxSizeAdmitted(ctx context.Context, id, team string, cpuCount, memoryMB int, admit func(store.TeamUse) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('cove-team:' || $1))`, team); err != nil {
			return fmt.Errorf("lock team %s: %w", team, err)
		}
		var use store.TeamUse
		if err := tx.QueryRow(ctx, `SELECT count(*), coalesce(sum(cpu_count), 0), coalesce(sum(memory_mb), 0), coalesce(sum(disk_mb), 0)
			FROM sandboxes WHERE team = $1 AND id <> $2`, team, id).Scan(&use.Sandboxes, &use.CPUs, &use.MemoryMB, &use.DiskMB); err != nil {
			return fmt.Errorf("team %s's sandboxes: %w", team, err)
		}
		if err := admit(use); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE sandboxes SET cpu_count = $3, memory_mb = $4 WHERE id = $1 AND team = $2`, id, team, cpuCount, memoryMB)
		if err != nil {
			return fmt.Errorf("update sandbox %s: %w", id, err)
		}
		if tag.RowsAffected() == 0 {
			return errs.New(errs.NotFound, "sandbox %s not found", id)
		}
		return nil
	})
}

// execer runs a statement: the pool, or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func insertSandbox(ctx context.Context, db execer, sb store.Sandbox) error {
	meta := sb.Metadata
	if meta == nil {
		meta = map[string]string{}
	}
	_, err := db.Exec(ctx, `INSERT INTO sandboxes (id, team, template_id, alias, state, started_at, end_at,
		cpu_count, memory_mb, disk_mb, metadata, allow_internet_access, auto_pause, auto_resume, secure, public_traffic,
		isolation, envd_version, node)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)`,
		sb.ID, sb.Team, sb.TemplateID, sb.Alias, sb.State, sb.StartedAt.UnixNano(), sb.EndAt.UnixNano(),
		sb.CPUCount, sb.MemoryMB, sb.DiskMB, meta, sb.AllowInternetAccess, sb.AutoPause, sb.AutoResume, sb.Secure, sb.PublicTraffic,
		sb.Isolation, sb.EnvdVersion, sb.Node)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" { // unique_violation
		return errs.New(errs.AlreadyExists, "sandbox %s already exists", sb.ID)
	}
	if err != nil {
		return fmt.Errorf("insert sandbox %s: %w", sb.ID, err)
	}
	if sb.Answer != nil { // db is the transaction that records the sandbox
		return finishIdempotent(ctx, db, *sb.Answer, sb.Team)
	}
	return nil
}

// columns are a sandbox row's, in the order scan reads them.
const columns = `id, team, template_id, alias, state, started_at, end_at, cpu_count, memory_mb, disk_mb,
	metadata, allow_internet_access, auto_pause, auto_resume, secure, public_traffic, isolation, envd_version, node`

func scan(row pgx.Row) (store.Sandbox, error) {
	var (
		sb           store.Sandbox
		started, end int64
	)
	err := row.Scan(&sb.ID, &sb.Team, &sb.TemplateID, &sb.Alias, &sb.State, &started, &end, &sb.CPUCount, &sb.MemoryMB,
		&sb.DiskMB, &sb.Metadata, &sb.AllowInternetAccess, &sb.AutoPause, &sb.AutoResume, &sb.Secure, &sb.PublicTraffic,
		&sb.Isolation, &sb.EnvdVersion, &sb.Node)
	sb.StartedAt, sb.EndAt = time.Unix(0, started).UTC(), time.Unix(0, end).UTC()
	return sb, err
}

// Sandbox implements store.Store.
func (s *Store) Sandbox(ctx context.Context, id string) (store.Sandbox, error) {
	sb, err := scan(s.pool.QueryRow(ctx, `SELECT `+columns+` FROM sandboxes WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return sb, errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	if err != nil {
		return sb, fmt.Errorf("read sandbox %s: %w", id, err)
	}
	return sb, nil
}

// SetSandboxEnd implements store.Store.
func (s *Store) SetSandboxEnd(ctx context.Context, id string, end time.Time) error {
	return s.update(ctx, id, `UPDATE sandboxes SET end_at = $2 WHERE id = $1`, end.UnixNano())
}

// SetSandboxSize implements store.Store.
func (s *Store) SetSandboxSize(ctx context.Context, id string, cpuCount, memoryMB int) error {
	return s.update(ctx, id, `UPDATE sandboxes SET cpu_count = $2, memory_mb = $3 WHERE id = $1`, cpuCount, memoryMB)
}

// SetSandboxState implements store.Store.
func (s *Store) SetSandboxState(ctx context.Context, id string, state sandboxes.State, end time.Time) error {
	return s.update(ctx, id, `UPDATE sandboxes SET state = $2, end_at = $3 WHERE id = $1`, state, end.UnixNano())
}

// update runs an UPDATE of sandbox id ($1): NotFound when it names none.
func (s *Store) update(ctx context.Context, id, q string, args ...any) error {
	tag, err := s.pool.Exec(ctx, q, append([]any{id}, args...)...)
	if err != nil {
		return fmt.Errorf("update sandbox %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	return nil
}

// DeleteSandbox implements store.Store.
func (s *Store) DeleteSandbox(ctx context.Context, id string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM sandboxes WHERE id = $1`, id)
	if err != nil {
		return false, fmt.Errorf("delete sandbox %s: %w", id, err)
	}
	return tag.RowsAffected() > 0, nil
}

// ListSandboxes implements store.Store: every filter, the metadata's
// included (jsonb containment), and the page are the query's.
func (s *Store) ListSandboxes(ctx context.Context, f store.ListFilter) ([]store.Sandbox, error) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	where = append(where, "team = "+arg(f.Team))
	if len(f.States) > 0 {
		states := make([]string, len(f.States))
		for i, st := range f.States {
			states[i] = string(st)
		}
		where = append(where, "state = ANY("+arg(states)+")")
	}
	if len(f.Templates) > 0 {
		n := arg(f.Templates)
		where = append(where, "(template_id = ANY("+n+") OR alias = ANY("+n+"))")
	}
	if len(f.Metadata) > 0 {
		where = append(where, "metadata @> "+arg(f.Metadata))
	}
	if !f.StartedAfter.IsZero() {
		where = append(where, "started_at >= "+arg(f.StartedAfter.UnixNano()))
	}
	if !f.StartedBefore.IsZero() {
		where = append(where, "started_at <= "+arg(f.StartedBefore.UnixNano()))
	}
	order, cmp := "DESC", "<"
	if f.Ascending {
		order, cmp = "ASC", ">"
	}
	if f.After != nil {
		where = append(where, fmt.Sprintf("(started_at, id) %s (%s, %s)", cmp, arg(f.After.StartedAt.UnixNano()), arg(f.After.ID)))
	}
	q := `SELECT ` + columns + ` FROM sandboxes WHERE ` + strings.Join(where, " AND ") +
		fmt.Sprintf(` ORDER BY started_at %s, id %s`, order, order)
	if f.Limit > 0 {
		q += " LIMIT " + arg(f.Limit)
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Sandbox, error) { return scan(r) })
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	return out, nil
}

// AllSandboxIDs implements store.Store.
func (s *Store) AllSandboxIDs(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT id FROM sandboxes`)
	if err != nil {
		return nil, fmt.Errorf("list sandbox ids: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list sandbox ids: %w", err)
	}
	return ids, nil
}

// Own makes this process the database's only user of its kind until
// release (or its end): a PostgreSQL advisory lock named by name, held on
// a connection of its own. Another process holding it is a Conflict.
func (s *Store) Own(ctx context.Context, name string) (release func(), err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtext($1))`, name).Scan(&got); err != nil {
		conn.Release()
		return nil, fmt.Errorf("postgres: lock %s: %w", name, err)
	}
	if !got {
		conn.Release()
		return nil, errs.New(errs.Conflict, "the database is in use by another %s", name)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = conn.Exec(ctx, `SELECT pg_advisory_unlock(hashtext($1))`, name)
		conn.Release()
	}, nil
}
