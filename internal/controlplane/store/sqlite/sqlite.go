// Package sqlite is the embedded store: a pure-Go SQLite database
// (modernc.org/sqlite, so the binary stays static) with goose migrations.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/pressly/goose/v3"
	driver "modernc.org/sqlite" // registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/sandboxes"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store implements store.Store.
type Store struct {
	db     *sql.DB
	limits store.Limits
}

var _ store.Store = (*Store)(nil)

// Open opens (creating and migrating) the database at path.
func Open(ctx context.Context, path string) (*Store, error) {
	if err := ownerOnly(path); err != nil {
		return nil, err
	}
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1) // one writer; SQLite serializes anyway
	if err := migrate(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	return &Store{db: db, limits: store.DefaultLimits}, nil
}

// SetLimits implements store.Store.
func (s *Store) SetLimits(l store.Limits) { s.limits = l.OrDefault() }

// ownerOnly makes the database file, and its WAL and shared-memory files
// if they exist, readable by their owner only: the database holds the
// secret every agent token is derived from. SQLite gives the files it
// creates beside the database the database's mode.
func ownerOnly(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("make %s private: %w", p, err)
		}
	}
	return nil
}

func migrate(ctx context.Context, db *sql.DB) error {
	p, err := goose.NewProvider(goose.DialectSQLite3, db, mustSub(migrations, "migrations"))
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// Close implements store.Store.
func (s *Store) Close() error { return s.db.Close() }

// Secret implements store.Store.
func (s *Store) Secret(ctx context.Context, name string, gen func() ([]byte, error)) ([]byte, error) {
	var v []byte
	err := s.db.QueryRowContext(ctx, `SELECT value FROM secrets WHERE name = ?`, name).Scan(&v)
	if err == nil {
		return v, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("read secret %s: %w", name, err)
	}
	if v, err = gen(); err != nil {
		return nil, err
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO secrets (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`, name, v); err != nil {
		return nil, fmt.Errorf("store secret %s: %w", name, err)
	}
	// Another writer may have won the race: read what is stored.
	if err := s.db.QueryRowContext(ctx, `SELECT value FROM secrets WHERE name = ?`, name).Scan(&v); err != nil {
		return nil, fmt.Errorf("read secret %s: %w", name, err)
	}
	return v, nil
}

// InsertSandbox implements store.Store.
func (s *Store) InsertSandbox(ctx context.Context, sb store.Sandbox) error {
	if sb.Answer == nil {
		return insertSandbox(ctx, s.db, sb)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("insert sandbox %s: %w", sb.ID, err)
	}
	defer tx.Rollback()
	if err := insertSandbox(ctx, tx, sb); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("insert sandbox %s: %w", sb.ID, err)
	}
	return nil
}

// execer runs a statement: the database, or a transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// insertSandbox records sb, and its key's answer when it has one, through
// db (the transaction that holds both when it does).
func insertSandbox(ctx context.Context, db execer, sb store.Sandbox) error {
	meta, err := json.Marshal(sb.Metadata)
	if err != nil {
		return err
	}
	var internet any
	if sb.AllowInternetAccess != nil {
		internet = *sb.AllowInternetAccess
	}
	_, err = db.ExecContext(ctx, `INSERT INTO sandboxes (id, team, template_id, alias, state, started_at, end_at,
		cpu_count, memory_mb, disk_mb, metadata, allow_internet_access, auto_pause, secure, envd_version, public_traffic, isolation, auto_resume, node)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		sb.ID, sb.Team, sb.TemplateID, sb.Alias, sb.State, sb.StartedAt.UnixNano(), sb.EndAt.UnixNano(),
		sb.CPUCount, sb.MemoryMB, sb.DiskMB, string(meta), internet, sb.AutoPause, sb.Secure, sb.EnvdVersion, sb.PublicTraffic, sb.Isolation, sb.AutoResume, sb.Node)
	if err != nil {
		if duplicate(err) {
			return errs.New(errs.AlreadyExists, "sandbox %s already exists", sb.ID)
		}
		return fmt.Errorf("insert sandbox %s: %w", sb.ID, err)
	}
	if sb.Answer != nil {
		return finishIdempotent(ctx, db, *sb.Answer, sb.Team)
	}
	return nil
}

const sandboxColumns = `id, team, template_id, alias, state, started_at, end_at, cpu_count, memory_mb, disk_mb,
	metadata, allow_internet_access, auto_pause, secure, envd_version, public_traffic, isolation, auto_resume, node`

func scanSandbox(row interface{ Scan(...any) error }) (store.Sandbox, error) {
	var (
		sb                store.Sandbox
		started, end      int64
		meta              string
		internet          sql.NullBool
		autoPause, secure bool
	)
	err := row.Scan(&sb.ID, &sb.Team, &sb.TemplateID, &sb.Alias, &sb.State, &started, &end, &sb.CPUCount,
		&sb.MemoryMB, &sb.DiskMB, &meta, &internet, &autoPause, &secure, &sb.EnvdVersion, &sb.PublicTraffic, &sb.Isolation, &sb.AutoResume, &sb.Node)
	if err != nil {
		return sb, err
	}
	sb.StartedAt, sb.EndAt = time.Unix(0, started).UTC(), time.Unix(0, end).UTC()
	if err := json.Unmarshal([]byte(meta), &sb.Metadata); err != nil {
		return sb, fmt.Errorf("sandbox %s metadata: %w", sb.ID, err)
	}
	if internet.Valid {
		sb.AllowInternetAccess = &internet.Bool
	}
	sb.AutoPause, sb.Secure = autoPause, secure
	return sb, nil
}

// Sandbox implements store.Store.
func (s *Store) Sandbox(ctx context.Context, id string) (store.Sandbox, error) {
	sb, err := scanSandbox(s.db.QueryRowContext(ctx, `SELECT `+sandboxColumns+` FROM sandboxes WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return sb, errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	if err != nil {
		return sb, fmt.Errorf("read sandbox %s: %w", id, err)
	}
	return sb, nil
}

// SetSandboxEnd implements store.Store.
func (s *Store) SetSandboxEnd(ctx context.Context, id string, end time.Time) error {
	res, err := s.db.ExecContext(ctx, `UPDATE sandboxes SET end_at = ? WHERE id = ?`, end.UnixNano(), id)
	if err != nil {
		return fmt.Errorf("update sandbox %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	return nil
}

// SetSandboxSize implements store.Store.
func (s *Store) SetSandboxSize(ctx context.Context, id string, cpuCount, memoryMB int) error {
	res, err := s.db.ExecContext(ctx, `UPDATE sandboxes SET cpu_count = ?, memory_mb = ? WHERE id = ?`, cpuCount, memoryMB, id)
	if err != nil {
		return fmt.Errorf("update sandbox %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	return nil
}

// SetSandboxState implements store.Store.
func (s *Store) SetSandboxState(ctx context.Context, id string, state sandboxes.State, end time.Time) error {
	res, err := s.db.ExecContext(ctx, `UPDATE sandboxes SET state = ?, end_at = ? WHERE id = ?`, state, end.UnixNano(), id)
	if err != nil {
		return fmt.Errorf("update sandbox %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	return nil
}

// DeleteSandbox implements store.Store.
func (s *Store) DeleteSandbox(ctx context.Context, id string) (bool, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM sandboxes WHERE id = ?`, id)
	if err != nil {
		return false, fmt.Errorf("delete sandbox %s: %w", id, err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// ListSandboxes implements store.Store. Metadata is filtered here, after
// the query: it is a JSON column.
func (s *Store) ListSandboxes(ctx context.Context, f store.ListFilter) ([]store.Sandbox, error) {
	q := `SELECT ` + sandboxColumns + ` FROM sandboxes WHERE team = ?`
	args := []any{f.Team}
	if len(f.States) > 0 {
		q += ` AND state IN (?` + strings.Repeat(", ?", len(f.States)-1) + `)`
		for _, st := range f.States {
			args = append(args, st)
		}
	}
	if len(f.Templates) > 0 {
		in := `(?` + strings.Repeat(", ?", len(f.Templates)-1) + `)`
		q += ` AND (template_id IN ` + in + ` OR alias IN ` + in + `)`
		for range 2 {
			for _, t := range f.Templates {
				args = append(args, t)
			}
		}
	}
	if !f.StartedAfter.IsZero() {
		q += ` AND started_at >= ?`
		args = append(args, f.StartedAfter.UnixNano())
	}
	if !f.StartedBefore.IsZero() {
		q += ` AND started_at <= ?`
		args = append(args, f.StartedBefore.UnixNano())
	}
	order, cmp := "DESC", "<"
	if f.Ascending {
		order, cmp = "ASC", ">"
	}
	if f.After != nil {
		q += fmt.Sprintf(` AND (started_at %s ? OR (started_at = ? AND id %s ?))`, cmp, cmp)
		n := f.After.StartedAt.UnixNano()
		args = append(args, n, n, f.After.ID)
	}
	q += fmt.Sprintf(` ORDER BY started_at %s, id %s`, order, order)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	defer rows.Close()
	var out []store.Sandbox
	for rows.Next() {
		sb, err := scanSandbox(rows)
		if err != nil {
			return nil, err
		}
		if !matches(sb.Metadata, f.Metadata) {
			continue
		}
		out = append(out, sb)
		if f.Limit > 0 && len(out) == f.Limit {
			break
		}
	}
	return out, rows.Err()
}

func matches(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// AllSandboxIDs implements store.Store.
func (s *Store) AllSandboxIDs(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM sandboxes`)
	if err != nil {
		return nil, fmt.Errorf("list sandbox ids: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// duplicate reports whether err is a UNIQUE or PRIMARY KEY constraint's
// refusal.
func duplicate(err error) bool {
	var e *driver.Error
	return errors.As(err, &e) && (e.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || e.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY)
}
