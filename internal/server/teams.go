package server

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/covesandbox/cove/internal/controlplane/store"
	"github.com/covesandbox/cove/internal/controlplane/store/postgres"
	"github.com/covesandbox/cove/internal/errs"
)

// DeleteTeam deletes a team and its keys, from the command line beside a
// server: refused while the team has sandboxes (the store checks),
// templates or volumes, which would outlive it with no key to delete them.
// dataDir is where a server without a database keeps them.
func DeleteTeam(ctx context.Context, st store.Store, dataDir string, t store.Team) error {
	templates, volumes, err := holdings(ctx, st, dataDir, t.ID)
	if err != nil {
		return err
	}
	if templates+volumes > 0 {
		return errs.New(errs.Conflict, "team %s has %d templates (snapshots included) and %d volumes: delete them first, with one of its keys", t.Name, templates, volumes)
	}
	return st.DeleteTeam(ctx, t.ID)
}

// holdings counts a team's template records and volumes: in the cluster's
// database, else in the data directory's records (read only).
func holdings(ctx context.Context, st store.Store, dataDir, team string) (templates, volumes int, err error) {
	if pg, ok := st.(*postgres.Store); ok {
		recs, err := pg.Templates(ctx)
		if err != nil {
			return 0, 0, err
		}
		vols, err := pg.TeamVolumes(ctx, team)
		if err != nil {
			return 0, 0, err
		}
		for _, r := range recs {
			if r.Team == team {
				templates++
			}
		}
		return templates, len(vols), nil
	}
	if templates, err = countRecords(filepath.Join(dataDir, "templates", "templates"), team); err != nil {
		return 0, 0, err
	}
	volumes, err = countRecords(filepath.Join(dataDir, "volumes"), team)
	return templates, volumes, err
}

// countRecords counts the JSON records in dir (template.Record,
// volume.Volume: each names its team) of team.
func countRecords(dir, team string) (int, error) {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return 0, err
		}
		var rec struct {
			Team string `json:"team"`
		}
		if err := json.Unmarshal(data, &rec); err != nil {
			return 0, fmt.Errorf("read %s: %w", e.Name(), err)
		}
		if rec.Team == team {
			n++
		}
	}
	return n, nil
}
