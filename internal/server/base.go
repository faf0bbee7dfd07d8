package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/covesandbox/cove/internal/controlplane/cluster"
	"github.com/covesandbox/cove/internal/controlplane/service"
	"github.com/covesandbox/cove/internal/errs"
	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/node"
	"github.com/covesandbox/cove/internal/template"
)

// The --base modes: what the name base serves.
const (
	// BaseHost: the host template, the host's /usr read-only (instant,
	// whatever the host holds).
	BaseHost = "host"
	// BaseDebian: E2B's base, the debian recipe built from Debian's
	// archive (the same on every node); the host template until it is
	// ready.
	BaseDebian = "debian"
)

// baseRecipe is the recipe base is handed to in BaseDebian mode.
const baseRecipe = "debian"

// checkBase refuses a --base mode Cove has not.
func checkBase(mode string) error {
	switch mode {
	case "", BaseHost, BaseDebian:
		return nil
	}
	return errs.New(errs.InvalidArgument, "--base %q: it is host (the host's /usr) or debian (E2B's base from Debian's archive)", mode)
}

// basePool keeps the warm sandboxes base is handed over with: a node's
// (cove server, cove node), or the cluster's nodes as a replica sees them
// (clusterPool).
type basePool interface {
	// Warm makes ref a template it keeps warm.
	Warm(ctx context.Context, ref string) error
	// Warmed is how many of templateID's are warm (where it stands for
	// many nodes, the fewest any has).
	Warmed(templateID string) int
}

// clusterPool is the cluster's nodes as a replica sees them: each node
// warms the recipe by itself (handOverBase there), the replica waits.
type clusterPool struct{ nodes *cluster.Cluster }

func (clusterPool) Warm(context.Context, string) error { return nil }

func (p clusterPool) Warmed(templateID string) int { return p.nodes.Warmed(templateID) }

// baseWarmWait is how long handOverBase waits for a warm sandbox of the
// recipe: a pool that cannot warm it (its failures are logged) holds base
// back no longer.
const baseWarmWait = time.Minute

// handOverBase gives the name base to the debian recipe once a ready build
// of it is here (a cluster's records are shared: every role sees it) and,
// where pool is given, a sandbox of it is warm (on every node, for a
// cluster's replica), so that no create of base is cold or fails on the
// way. Until then the host template serves base; it stays reachable as
// host. It returns at once when the recipe is ready at the start (a
// restart), else it watches in the background until ctx ends.
func handOverBase(ctx context.Context, templates *template.Store, pool basePool, log *slog.Logger) {
	ready := func() bool {
		r, err := templates.Get("", baseRecipe)
		return err == nil && r.Serving() != nil
	}
	hand := func() {
		if err := templates.SetBase(baseRecipe); err != nil {
			log.Error("hand base to the debian recipe", logx.Err(err))
			return
		}
		if pool != nil { // at a restart: no create of base has warmed it yet
			if err := pool.Warm(ctx, baseRecipe); err != nil {
				log.Warn("warm E2B's base", logx.Err(err))
			}
		}
		log.Info("base is E2B's base now, built from Debian's archive; the host's template is host", "template", baseRecipe)
	}
	if ready() {
		hand()
		return
	}
	log.Info("base is the host's template until E2B's base (the debian recipe) is built from Debian's archive; cove template list shows how far", "template", baseRecipe)
	go func() {
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		warming := time.Time{}
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if !ready() {
				continue
			}
			if pool != nil {
				if warming.IsZero() {
					warming = time.Now()
					if err := pool.Warm(ctx, baseRecipe); err != nil {
						log.Warn("warm the debian recipe before it serves base", logx.Err(err))
					}
				}
				if pool.Warmed(templates.IDOf("", baseRecipe)) == 0 && time.Since(warming) < baseWarmWait {
					continue
				}
			}
			hand()
			return
		}
	}()
}

// startBase, in BaseDebian mode, prepares the debian recipe in the
// background (whatever --prepare-templates says: base waits for it) and
// hands base to it once it is ready.
func startBase(ctx context.Context, templates *template.Store, tpls *service.Templates, pool basePool, log *slog.Logger) {
	if _, err := tpls.Prepare(baseRecipe); err != nil {
		log.Info("E2B's base (the debian recipe) is not built here: base stays the host's template", "reason", err.Error())
	}
	handOverBase(ctx, templates, pool, log)
}

// warmer is mgr where it keeps warm sandboxes, else nil.
func warmer(mgr *node.Manager, poolSize int) basePool {
	if poolSize > 0 {
		return mgr
	}
	return nil
}
