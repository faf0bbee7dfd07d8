package server

import (
	"context"
	"log/slog"
	"time"

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

// handOverBase gives the name base to the debian recipe once a ready build
// of it is here (a cluster's records are shared: every role sees it) and,
// where mgr is given (a node that keeps warm sandboxes), one of it is
// warm, so that no create of base is cold or fails on the way. Until then the host template serves
// base; it stays reachable as host. It returns at once when the recipe is
// ready at the start (a restart), else it watches in the background until
// ctx ends.
func handOverBase(ctx context.Context, templates *template.Store, mgr *node.Manager, log *slog.Logger) {
	ready := func() bool {
		r, err := templates.Get("", baseRecipe)
		return err == nil && r.Serving() != nil
	}
	hand := func() {
		if err := templates.SetBase(baseRecipe); err != nil {
			log.Error("hand base to the debian recipe", logx.Err(err))
			return
		}
		if mgr != nil { // at a restart: no create of base has warmed it yet
			if err := mgr.Warm(ctx, baseRecipe); err != nil {
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
			if mgr != nil {
				id := templates.IDOf("", baseRecipe)
				if warming.IsZero() {
					warming = time.Now()
					if err := mgr.Warm(ctx, baseRecipe); err != nil {
						log.Warn("warm the debian recipe before it serves base", logx.Err(err))
					}
				}
				// A minute at most: a pool that cannot warm it (its failures
				// are logged) holds base back no longer.
				if mgr.Warmed(id) == 0 && time.Since(warming) < time.Minute {
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
func startBase(ctx context.Context, templates *template.Store, tpls *service.Templates, mgr *node.Manager, log *slog.Logger) {
	if _, err := tpls.Prepare(baseRecipe); err != nil {
		log.Info("E2B's base (the debian recipe) is not built here: base stays the host's template", "reason", err.Error())
	}
	handOverBase(ctx, templates, mgr, log)
}

// warmer is mgr where it keeps warm sandboxes, else nil.
func warmer(mgr *node.Manager, poolSize int) *node.Manager {
	if poolSize > 0 {
		return mgr
	}
	return nil
}
