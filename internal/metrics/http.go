package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// HTTP counts what an API server answers: the API's requests by route
// (the pattern that served them, never a path with ids) and status, and
// the sandbox proxy's by status and bytes.
type HTTP struct {
	requests      *prometheus.CounterVec
	seconds       *prometheus.HistogramVec
	proxyRequests *prometheus.CounterVec
	proxyBytes    prometheus.Counter
	processStart  prometheus.Histogram
	reg           prometheus.Registerer
}

// processStartPath is the agent's RPC that starts a process: its answer
// streams, the process's start event first.
const processStartPath = "/process.Process/Start"

// NewHTTP makes the API server's metrics and registers them on reg.
func NewHTTP(reg prometheus.Registerer) *HTTP {
	h := &HTTP{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cove_api_requests_total",
			Help: "API requests answered, by route (the pattern that served them) and status code."}, []string{"route", "code"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "cove_api_request_seconds",
			Help: "Time to answer an API request, by route.", Buckets: latencyBuckets}, []string{"route"}),
		proxyRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cove_proxy_requests_total",
			Help: "Requests to sandboxes' ports through the proxy, by status code (502: the port did not answer)."}, []string{"code"}),
		proxyBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "cove_proxy_response_bytes_total",
			Help: "Bytes of the sandboxes' answers through the proxy (an upgraded connection's stream aside)."}),
		processStart: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cove_process_start_seconds",
			Help: "Time from a process start request through the proxy to the agent's first answer (the process started in its sandbox).", Buckets: latencyBuckets}),
	}
	reg.MustRegister(h.requests, h.seconds, h.proxyRequests, h.proxyBytes, h.processStart)
	h.reg = reg
	return h
}

// Connections is what an API server's listeners hold and refused.
type Connections struct {
	// Unauthenticated connections held now.
	Unauthenticated int
	// Refused counts the connections closed at once (a cap or the
	// descriptor budget full), Evicted those closed for a newer one from an
	// address that held fewer, AcceptErrors the accepts that failed.
	Refused, Evicted, AcceptErrors int64
}

// Connections adds the metrics of the server's connections, read from
// status at each scrape.
func (h *HTTP) Connections(status func() Connections) {
	h.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cove_unauthenticated_connections",
			Help: "Connections held that have not authenticated yet (no request on them has)."},
			func() float64 { return float64(status().Unauthenticated) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cove_unauthenticated_refused_total",
			Help: "New connections closed at once: too many not yet authenticated (in all or from one address), or their descriptors all in use."},
			func() float64 { return float64(status().Refused) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cove_unauthenticated_evicted_total",
			Help: "Connections not yet authenticated closed, the cap or the budget full, for a new one from an address that held fewer."},
			func() float64 { return float64(status().Evicted) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cove_accept_errors_total",
			Help: "Accepts that failed (out of descriptors, say) on the API's listeners; each is retried after a backoff."},
			func() float64 { return float64(status().AcceptErrors) }))
}

// API counts the requests next (the API's mux) answers.
func (h *HTTP) API(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(rec, r)
		route := r.Pattern // set by the mux that served it
		if route == "" {
			route = "unmatched"
		}
		h.requests.WithLabelValues(route, strconv.Itoa(rec.code)).Inc()
		h.seconds.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
}

// Proxy counts the requests next (the sandbox proxy) answers.
func (h *HTTP) Proxy(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(rec, r)
		h.proxyRequests.WithLabelValues(strconv.Itoa(rec.code)).Inc()
		h.proxyBytes.Add(float64(rec.bytes))
		if r.URL.Path == processStartPath && rec.code == http.StatusOK && !rec.first.IsZero() {
			h.processStart.Observe(rec.first.Sub(start).Seconds())
		}
	})
}

// recorder keeps a response's status and size; Unwrap lets
// http.ResponseController (flushes, upgrades) reach the writer beneath.
type recorder struct {
	http.ResponseWriter
	code        int
	bytes       int64
	wroteHeader bool
	first       time.Time // of the first bytes of the body
}

func (r *recorder) WriteHeader(code int) {
	if !r.wroteHeader {
		r.code, r.wroteHeader = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wroteHeader = true
	if r.first.IsZero() && len(b) > 0 {
		r.first = time.Now()
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// Flush passes a flush on (the proxy streams).
func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
