// Package metrics exposes Cove to Prometheus: what a node runs, what it
// has promised of its capacity, and how long its operations take. Labels
// are bounded (states, drivers, templates, operations), never a
// sandbox's id.
package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/covesandbox/cove/internal/node"
	"github.com/covesandbox/cove/internal/sandboxes"
)

// Node instruments a node (cove server, cove node): it is the node's
// Observer, and collects its sandboxes and capacity at each scrape.
type Node struct {
	src        Source
	create     *prometheus.HistogramVec
	kill       prometheus.Histogram
	pause      *prometheus.HistogramVec
	resume     prometheus.Histogram
	phases     *prometheus.HistogramVec
	warmMisses *prometheus.CounterVec
	phaseMoves *prometheus.CounterVec

	sandboxes, warm                 *prometheus.Desc
	cpuCapacity, cpuCommitted       *prometheus.Desc
	memoryCapacity, memoryCommitted *prometheus.Desc
	diskCapacity, diskFree          *prometheus.Desc
	diskCommitted                   *prometheus.Desc
	networks                        *prometheus.Desc
	egressOpen, egressRefused       *prometheus.Desc
	builds                          *prometheus.HistogramVec
	// Usage by team and template: a platform's bill.
	usageSeconds, usageCPU, usageMemory *prometheus.Desc
}

var _ node.Observer = (*Node)(nil)

// Source is what a node's metrics read at each scrape (*node.Manager).
type Source interface {
	List(ctx context.Context) ([]sandboxes.Info, error)
	Load() node.Load
	Usage() []sandboxes.Usage
}

// latencyBuckets span a pause of a millisecond to a boot of seconds;
// buildBuckets a cached build's second to a debootstrap's hour.
var (
	latencyBuckets = prometheus.ExponentialBuckets(0.001, 2, 15)  // 1 ms … 16 s
	phaseBuckets   = prometheus.ExponentialBuckets(0.0001, 2, 16) // 0.1 ms … 3.3 s
	buildBuckets   = prometheus.ExponentialBuckets(0.25, 2, 15)   // 0.25 s … 68 min
)

// NewNode makes a node's metrics and registers them on reg; Watch names
// the node they read at each scrape.
func NewNode(reg prometheus.Registerer) *Node {
	n := &Node{
		create: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "cove_sandbox_create_seconds",
			Help: "Time to create a sandbox until its agent is ready, by driver; pooled: handed out from the warm pool.", Buckets: latencyBuckets},
			[]string{"driver", "source"}),
		kill: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cove_sandbox_kill_seconds",
			Help: "Time to kill a sandbox and remove what it held.", Buckets: latencyBuckets}),
		pause: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "cove_sandbox_pause_seconds",
			Help: "Time to pause a sandbox, with its memory kept (memory=true) or its files saved (memory=false).", Buckets: latencyBuckets},
			[]string{"memory"}),
		resume: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cove_sandbox_resume_seconds",
			Help: "Time to resume a paused sandbox.", Buckets: latencyBuckets}),
		phases: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "cove_sandbox_phase_seconds",
			Help:    "Time of each phase of a node's operations, in the order they run: create (admit, then handover from the warm pool, or network, the driver's own phases, driver for the rest of its create, record, start_command), warm (a warm sandbox made: the same, then first_command) and kill (the driver's phases, destroy for the rest, network, record). The namespaces driver's phases: spawn, cgroup, config, agent_ready, driver_record; on kill kill_init, cgroup, files. gVisor's: cgroup, bundle, runsc, agent_ready.",
			Buckets: phaseBuckets}, []string{"op", "phase"}),
		warmMisses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cove_warm_pool_misses_total",
			Help: "Creates a warm sandbox could have served that found none of their template ready."}, []string{"template"}),
		phaseMoves: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cove_sandbox_transitions_total",
			Help: "Changes of phase of sandboxes' records (running, saving, paused, spilling, paused on disk, paused as files; none: no record), by the phases they left and entered."}, []string{"from", "to"}),
		sandboxes: prometheus.NewDesc("cove_sandboxes", "Sandboxes on the node, by state, template and driver (warm ones aside).",
			[]string{"state", "template", "driver"}, nil),
		warm:         prometheus.NewDesc("cove_warm_sandboxes", "Warm sandboxes ready, by template.", []string{"template"}, nil),
		cpuCapacity:  prometheus.NewDesc("cove_node_cpu_capacity_millicores", "CPU the node may promise its sandboxes.", nil, nil),
		cpuCommitted: prometheus.NewDesc("cove_node_cpu_committed_millicores", "CPU its sandboxes' limits add up to.", nil, nil),
		memoryCapacity: prometheus.NewDesc("cove_node_memory_capacity_bytes",
			"Memory the node may promise its sandboxes (its memory times the overcommit).", nil, nil),
		memoryCommitted: prometheus.NewDesc("cove_node_memory_committed_bytes", "Memory its sandboxes' limits add up to.", nil, nil),
		diskCapacity:    prometheus.NewDesc("cove_node_disk_capacity_bytes", "Size of the file system that holds the node's data.", nil, nil),
		diskFree:        prometheus.NewDesc("cove_node_disk_free_bytes", "What is free of the file system that holds the node's data.", nil, nil),
		diskCommitted: prometheus.NewDesc("cove_node_disk_committed_bytes",
			"What its sandboxes' writable layers may grow to, added up (their disk limits).", nil, nil),
		builds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "cove_template_build_seconds",
			Help: "Time a template build ran on the node, by how it ended (ready, error).", Buckets: buildBuckets}, []string{"status"}),
		networks: prometheus.NewDesc("cove_networks", "Sandbox networks ready in the node's pool, or handed out to sandboxes (in_use); with node networking only.",
			[]string{"state"}, nil),
		egressOpen: prometheus.NewDesc("cove_egress_connections",
			"Connections sandboxes hold open through the node's egress proxy (allowOut names, rules, egressProxy); each sandbox's own is its metrics' egressConnections.", nil, nil),
		egressRefused: prometheus.NewDesc("cove_egress_refused_total",
			"Connections the egress proxy reset for a limit: a sandbox's (--egress-max-connections), a team's (--egress-max-connections-team), the node's, or the shared descriptors' (the reserve kept for the API reached).", []string{"limit"}, nil),
		usageSeconds: prometheus.NewDesc("cove_team_sandbox_seconds_total",
			"Seconds a team's sandboxes of a template ran on the node (paused ones do not count), since the node started.", []string{"team", "template"}, nil),
		usageCPU: prometheus.NewDesc("cove_team_cpu_seconds_total",
			"CPU-seconds a team's running sandboxes of a template held: their CPU limits times the seconds they ran.", []string{"team", "template"}, nil),
		usageMemory: prometheus.NewDesc("cove_team_memory_gib_seconds_total",
			"GiB-seconds of memory a team's running sandboxes of a template held: their memory limits times the seconds they ran.", []string{"team", "template"}, nil),
	}
	reg.MustRegister(n.create, n.kill, n.pause, n.resume, n.phases, n.warmMisses, n.phaseMoves, n.builds, n)
	return n
}

// Watch makes the scrapes read src (set once, before serving).
func (n *Node) Watch(src Source) { n.src = src }

// Created implements node.Observer.
func (n *Node) Created(d time.Duration, driver string, pooled bool) {
	source := "cold"
	if pooled {
		source = "pooled"
	}
	n.create.WithLabelValues(driver, source).Observe(d.Seconds())
}

// Phase implements node.Observer.
func (n *Node) Phase(op, phase string, d time.Duration) {
	n.phases.WithLabelValues(op, phase).Observe(d.Seconds())
}

// Killed implements node.Observer.
func (n *Node) Killed(d time.Duration) { n.kill.Observe(d.Seconds()) }

// Paused implements node.Observer.
func (n *Node) Paused(d time.Duration, memory bool) {
	label := "false"
	if memory {
		label = "true"
	}
	n.pause.WithLabelValues(label).Observe(d.Seconds())
}

// Resumed implements node.Observer.
func (n *Node) Resumed(d time.Duration) { n.resume.Observe(d.Seconds()) }

// WarmMissed implements node.Observer.
func (n *Node) WarmMissed(templateID string) { n.warmMisses.WithLabelValues(templateID).Inc() }

// Transitioned implements node.Observer.
func (n *Node) Transitioned(from, to sandboxes.Phase) {
	n.phaseMoves.WithLabelValues(string(from), string(to)).Inc()
}

// Built records a template build's end (template.Builder's Observe); a
// nil Node (metrics off) records nothing.
func (n *Node) Built(status string, d time.Duration) {
	if n != nil {
		n.builds.WithLabelValues(status).Observe(d.Seconds())
	}
}

// Describe implements prometheus.Collector (the gauges read at a scrape).
func (n *Node) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{n.sandboxes, n.warm, n.cpuCapacity, n.cpuCommitted, n.memoryCapacity, n.memoryCommitted,
		n.diskCapacity, n.diskFree, n.diskCommitted, n.networks, n.egressOpen, n.egressRefused, n.usageSeconds, n.usageCPU, n.usageMemory} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: the node's table and load now.
func (n *Node) Collect(ch chan<- prometheus.Metric) {
	if n.src == nil {
		return
	}
	type key struct{ state, template, driver string }
	counts := map[key]int{}
	list, _ := n.src.List(context.Background()) // a collect has no context; the node's table answers at once
	for _, info := range list {
		if info.ForBuild() {
			continue
		}
		counts[key{string(info.State), info.TemplateID, info.Isolation}]++
	}
	for k, c := range counts {
		ch <- prometheus.MustNewConstMetric(n.sandboxes, prometheus.GaugeValue, float64(c), k.state, k.template, k.driver)
	}
	l := n.src.Load()
	for tpl, c := range l.Warm {
		ch <- prometheus.MustNewConstMetric(n.warm, prometheus.GaugeValue, float64(c), tpl)
	}
	ch <- prometheus.MustNewConstMetric(n.cpuCapacity, prometheus.GaugeValue, float64(l.CPUs)*1000)
	ch <- prometheus.MustNewConstMetric(n.cpuCommitted, prometheus.GaugeValue, float64(l.CommittedCPUMillis))
	ch <- prometheus.MustNewConstMetric(n.memoryCapacity, prometheus.GaugeValue, float64(l.MemoryMB)*(1<<20))
	ch <- prometheus.MustNewConstMetric(n.memoryCommitted, prometheus.GaugeValue, float64(l.CommittedMemoryMB)*(1<<20))
	ch <- prometheus.MustNewConstMetric(n.diskCommitted, prometheus.GaugeValue, float64(l.CommittedDiskBytes))
	if l.DiskBytes > 0 {
		ch <- prometheus.MustNewConstMetric(n.diskCapacity, prometheus.GaugeValue, float64(l.DiskBytes))
		ch <- prometheus.MustNewConstMetric(n.diskFree, prometheus.GaugeValue, float64(l.DiskFreeBytes))
	}
	if l.Networking {
		ch <- prometheus.MustNewConstMetric(n.networks, prometheus.GaugeValue, float64(l.NetworksReady), "ready")
		ch <- prometheus.MustNewConstMetric(n.networks, prometheus.GaugeValue, float64(l.NetworksInUse), "in_use")
		ch <- prometheus.MustNewConstMetric(n.egressOpen, prometheus.GaugeValue, float64(l.Egress.Open))
		for limit, c := range l.Egress.Refused {
			ch <- prometheus.MustNewConstMetric(n.egressRefused, prometheus.CounterValue, float64(c), limit)
		}
	}
	for _, u := range n.src.Usage() {
		ch <- prometheus.MustNewConstMetric(n.usageSeconds, prometheus.CounterValue, u.Seconds, u.Team, u.Template)
		ch <- prometheus.MustNewConstMetric(n.usageCPU, prometheus.CounterValue, u.CPUSeconds, u.Team, u.Template)
		ch <- prometheus.MustNewConstMetric(n.usageMemory, prometheus.CounterValue, u.MemoryGiBSeconds, u.Team, u.Template)
	}
}
