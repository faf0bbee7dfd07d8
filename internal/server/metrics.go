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
)

// openMetrics serves a registry for Prometheus on cfg.MetricsListen, at
// /metrics, until ctx ends: the Go runtime's and the process's metrics,
// and what the role registers. Without that address it returns nil.
func openMetrics(ctx context.Context, cfg Config, log *slog.Logger) (*prometheus.Registry, error) {
	if cfg.MetricsListen == "" {
		return nil, nil
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
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
	return reg, nil
}

// httpMetrics adds an API server's metrics to reg (none when reg is nil).
func httpMetrics(reg *prometheus.Registry) *metrics.HTTP {
	if reg == nil {
		return nil
	}
	return metrics.NewHTTP(reg)
}
