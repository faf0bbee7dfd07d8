package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/errs"
)

var _ store.Members = (*Store)(nil)

// Heartbeat implements store.Members.
func (s *Store) Heartbeat(ctx context.Context, m store.Member) error {
	warm, cached := m.Warm, m.Cached
	if warm == nil {
		warm = map[string]int{}
	}
	if cached == nil {
		cached = []string{}
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO nodes (id, url, drivers, cpus, memory_mb, committed_cpu_millis, committed_memory_mb, sandboxes, warm, cached, sandbox_range, heartbeat_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, now())
		ON CONFLICT (id) DO UPDATE SET url = excluded.url, drivers = excluded.drivers, cpus = excluded.cpus,
			memory_mb = excluded.memory_mb, committed_cpu_millis = excluded.committed_cpu_millis,
			committed_memory_mb = excluded.committed_memory_mb, sandboxes = excluded.sandboxes,
			warm = excluded.warm, cached = excluded.cached, sandbox_range = excluded.sandbox_range, heartbeat_at = now()`,
		m.ID, m.URL, m.Drivers, m.CPUs, m.MemoryMB, m.CommittedCPUMillis, m.CommittedMemoryMB, m.Sandboxes, warm, cached, m.SandboxRange)
	if err != nil {
		return fmt.Errorf("heartbeat of node %s: %w", m.ID, err)
	}
	return nil
}

// Leave implements store.Members.
func (s *Store) Leave(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM nodes WHERE id = $1`, id); err != nil {
		return fmt.Errorf("node %s leaving: %w", id, err)
	}
	return nil
}

// Members implements store.Members.
func (s *Store) Members(ctx context.Context) ([]store.Member, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, url, drivers, cpus, memory_mb, committed_cpu_millis, committed_memory_mb, sandboxes,
		warm, cached, sandbox_range, extract(epoch FROM now() - heartbeat_at)::float8 FROM nodes ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Member, error) {
		var m store.Member
		var age float64
		err := r.Scan(&m.ID, &m.URL, &m.Drivers, &m.CPUs, &m.MemoryMB, &m.CommittedCPUMillis, &m.CommittedMemoryMB, &m.Sandboxes,
			&m.Warm, &m.Cached, &m.SandboxRange, &age)
		m.Age = time.Duration(age * float64(time.Second))
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return out, nil
}

// ForgetSandboxesOn implements store.Members.
func (s *Store) ForgetSandboxesOn(ctx context.Context, node string) ([]string, error) {
	var ids []string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE sandboxes SET node = '' WHERE node = $1 AND paused_state IS NOT NULL`, node); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `DELETE FROM sandboxes WHERE node = $1 RETURNING `+columns, node)
		if err != nil {
			return err
		}
		lost, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Sandbox, error) { return scan(r) })
		if err != nil {
			return err
		}
		// Each sandbox's log says how it ended: the API tells a later
		// request for it that its node was lost, not that it timed out;
		// its end is an event, in the same transaction (teams in order,
		// as each team's events are locked in turn).
		slices.SortFunc(lost, func(a, b store.Sandbox) int { return cmp.Or(cmp.Compare(a.Team, b.Team), cmp.Compare(a.ID, b.ID)) })
		now := time.Now()
		for _, g := range lost {
			ids = append(ids, g.ID)
			if err := s.addLogTx(ctx, tx, store.SandboxLog{SandboxID: g.ID, Team: g.Team, Time: now, Level: "error", Message: store.LostMessage,
				Fields: map[string]string{"reason": store.ReasonNodeLost, "node": node}}); err != nil {
				return err
			}
			if err := s.addEventTx(ctx, tx, store.NewEvent(g, store.EventKilled, store.ReasonNodeLost, now)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("forget the sandboxes of node %s: %w", node, err)
	}
	return ids, nil
}

// SetPausedState implements store.Members.
func (s *Store) SetPausedState(ctx context.Context, id string, state []byte) error {
	if _, err := s.pool.Exec(ctx, `UPDATE sandboxes SET paused_state = $2 WHERE id = $1`, id, state); err != nil {
		return fmt.Errorf("record the paused state of sandbox %s: %w", id, err)
	}
	return nil
}

// PausedState implements store.Members.
func (s *Store) PausedState(ctx context.Context, id string) ([]byte, error) {
	var state []byte
	err := s.pool.QueryRow(ctx, `SELECT paused_state FROM sandboxes WHERE id = $1`, id).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.New(errs.NotFound, "sandbox %s not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("read the paused state of sandbox %s: %w", id, err)
	}
	return state, nil
}

// PausedStates implements store.Members.
func (s *Store) PausedStates(ctx context.Context) ([][]byte, error) {
	rows, err := s.pool.Query(ctx, `SELECT paused_state FROM sandboxes WHERE paused_state IS NOT NULL`)
	if err == nil {
		var out [][]byte
		if out, err = pgx.CollectRows(rows, pgx.RowTo[[]byte]); err == nil {
			return out, nil
		}
	}
	return nil, fmt.Errorf("read the paused states: %w", err)
}

// MoveSandbox implements store.Members.
func (s *Store) MoveSandbox(ctx context.Context, id, from, to string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE sandboxes SET node = $3 WHERE id = $1 AND node = $2`, id, from, to)
	if err != nil {
		return false, fmt.Errorf("move sandbox %s to node %q: %w", id, to, err)
	}
	return tag.RowsAffected() == 1, nil
}

// SandboxesOn implements store.Members.
func (s *Store) SandboxesOn(ctx context.Context, node string) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT id FROM sandboxes WHERE node = $1`, node)
	if err != nil {
		return nil, fmt.Errorf("sandboxes of node %s: %w", node, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("sandboxes of node %s: %w", node, err)
	}
	return ids, nil
}
