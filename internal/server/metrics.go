package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/covesandbox/cove/internal/logx"
	"github.com/covesandbox/cove/internal/metrics"
	"github.com/covesandbox/cove/internal/node"
)

// nodeMetrics serves a node's metrics (cove server, cove node) for
// Prometheus on cfg.MetricsListen until ctx ends; without that address it
// does nothing and returns nil. The node's config gets the observer;
// Watch the manager once it exists.
func nodeMetrics(ctx context.Context, cfg Config, nodeCfg *node.Config, log *slog.Logger) (*metrics.Node, error) {
	if cfg.MetricsListen == "" {
		return nil, nil
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.NewNode(reg)
	nodeCfg.Observer = m
	ln, err := net.Listen("tcp", cfg.MetricsListen)
	if err != nil {
		return nil, fmt.Errorf("listen for metrics on %s: %w", cfg.MetricsListen, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", logx.Err(err))
		}
	}()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	log.Info("serving metrics", "addr", ln.Addr().String(), "path", "/metrics")
	return m, nil
}
