// Package metrics defines Lockstep's Prometheus metrics (documented in
// docs/metrics.md). Labels are low-cardinality by construction: results,
// priorities, DeviceClass names and topology domains (at most 500 a key),
// never pod, group or node names. Where
// kube-scheduler has a metric for the same thing, the shape is mirrored under
// the lockstep_ prefix.
package metrics

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"
)

// Results of a scheduling attempt.
const (
	ResultScheduled     = "scheduled"
	ResultUnschedulable = "unschedulable"
	ResultError         = "error"
)

// Scheduler holds the scheduler's metrics.
type Scheduler struct {
	Registry *prometheus.Registry

	// Attempts mirrors scheduler_podgroup_schedule_attempts_total.
	Attempts *prometheus.CounterVec
	// AttemptDuration mirrors scheduler_podgroup_scheduling_attempt_duration_seconds.
	AttemptDuration *prometheus.HistogramVec
	// TimeToScheduled is PodGroup creation → PodGroupInitiallyScheduled=True,
	// by the group's priority.
	TimeToScheduled *prometheus.HistogramVec
	// DeviceAllocationFailures counts units that did not fit for want of devices of a class.
	DeviceAllocationFailures *prometheus.CounterVec
	// WriteErrors counts failed claim writes and bindings.
	WriteErrors *prometheus.CounterVec
	// Preemptions counts preemptions carried out (victims evicted), by the
	// preemptor's priority.
	Preemptions *prometheus.CounterVec
	// PreemptionVictims mirrors scheduler_preemption_victims: pods evicted per preemption.
	PreemptionVictims prometheus.Histogram
	// TreeAttempts counts the scheduling attempts of scheduling trees (also
	// counted in Attempts), by result.
	TreeAttempts *prometheus.CounterVec
	// TreeTimeToScheduled is a tree root's creation →
	// CompositePodGroupInitiallyScheduled=True.
	TreeTimeToScheduled prometheus.Histogram
	// AlgorithmDuration mirrors scheduler_scheduling_algorithm_duration_seconds:
	// the snapshot and the decision of one attempt (a unit's or a tree's),
	// without the API writes.
	AlgorithmDuration prometheus.Histogram
	// KindServed is 1 for each of Lockstep's kinds the API server serves
	// and the scheduler watches, 0 for one it started without (its CRD
	// not installed: an upgrade that did not apply new CRDs), by resource.
	KindServed *prometheus.GaugeVec
}

// Descriptions of the gauges the scheduler computes at scrape time.
var (
	// PendingDesc mirrors scheduler_pending_entities: units waiting, by kind
	// (podgroup, pod) and priority.
	PendingDesc = prometheus.NewDesc("lockstep_pending_entities",
		"Units waiting to be scheduled, by kind (podgroup, pod) and priority.", []string{"kind", "priority"}, nil)
	// OldestPendingDesc: how long the unit of each kind and priority that
	// has waited longest has been waiting — a queue that never drains shows
	// here before anywhere else (seed 002: low priorities become
	// "permanent waiting rooms").
	OldestPendingDesc = prometheus.NewDesc("lockstep_pending_oldest_seconds",
		"Seconds the longest-waiting unit has been waiting (a PodGroup since it was created or its last incarnation ended, a pod since it was created), by kind (podgroup, pod) and priority.", []string{"kind", "priority"}, nil)
	// QueueDepthDesc: units active (ready) or parked (backing off or waiting for an event).
	QueueDepthDesc = prometheus.NewDesc("lockstep_queue_depth",
		"Units in the scheduling queue by state: active (ready) or parked (backing off or waiting for an event).", []string{"state"}, nil)
	// PodStatusPendingDesc and PodStatusPaceDesc: pending pods' conditions
	// the scheduler has decided and not yet written, and the pace it
	// writes them at now (it rises while the API server answers fast and
	// steps back to the floor when others need it).
	PodStatusPendingDesc = prometheus.NewDesc("lockstep_pod_status_writes_pending",
		"Pending pods' PodScheduled conditions decided and not yet written (a large gang that does not fit shows here while its members are told).", nil, nil)
	PodStatusPaceDesc = prometheus.NewDesc("lockstep_pod_status_write_pace",
		"Writes per second the pod condition writer allows now: from 50 (kube-scheduler's client default) up to 400 while the API server answers as fast as when idle.", nil, nil)
	// DomainDevicesDesc and DomainFreeDevicesDesc: devices of a DeviceClass
	// in one topology domain (a value of a node label, or of a device
	// attribute), all of them and those free (neither allocated nor
	// tainted), for the keys PodGroups use and the zone.
	DomainDevicesDesc = prometheus.NewDesc("lockstep_domain_devices",
		"Devices of a DeviceClass in one topology domain (a value of topology_key: a node label or a device attribute).", []string{"topology_key", "domain", "device_class"}, nil)
	DomainFreeDevicesDesc = prometheus.NewDesc("lockstep_domain_free_devices",
		"Free devices (neither allocated nor tainted) of a DeviceClass in one topology domain.", []string{"topology_key", "domain", "device_class"}, nil)
	// TopologyDomainsDesc: how many domains a topology key has.
	TopologyDomainsDesc = prometheus.NewDesc("lockstep_topology_domains",
		"Domains of a topology key (distinct values on the nodes, or on the devices for a device attribute); per-domain device series are exported for keys of at most 500 domains.", []string{"topology_key"}, nil)
)

// NewScheduler creates and registers the scheduler's metrics.
func NewScheduler() *Scheduler {
	m := &Scheduler{
		Registry: prometheus.NewRegistry(),
		Attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockstep_podgroup_schedule_attempts_total",
			Help: "Scheduling attempts of units (PodGroups and lone pods) by result.",
		}, []string{"result"}),
		AttemptDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lockstep_podgroup_scheduling_attempt_duration_seconds",
			Help:    "Time of one scheduling attempt (snapshot, placement and, when placed, the API writes), by result.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"result"}),
		TimeToScheduled: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lockstep_podgroup_time_to_scheduled_seconds",
			Help:    "Time from PodGroup creation to PodGroupInitiallyScheduled=True, by the group's priority.",
			Buckets: []float64{0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 28800, 86400},
		}, []string{"priority"}),
		DeviceAllocationFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockstep_device_allocation_failures_total",
			Help: "Attempts that failed because no free device of a DeviceClass was found, by class.",
		}, []string{"device_class"}),
		WriteErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockstep_write_errors_total",
			Help: "Failed API writes of decisions, by kind (volume: volume bindings; claim: allocation/reservation; binding).",
		}, []string{"kind"}),
		Preemptions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockstep_preemptions_total",
			Help: "Preemptions carried out (victims evicted for a unit that did not fit), by the preemptor's priority.",
		}, []string{"preemptor_priority"}),
		PreemptionVictims: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "lockstep_preemption_victims",
			Help:    "Pods evicted by one preemption.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12),
		}),
		TreeAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockstep_compositepodgroup_schedule_attempts_total",
			Help: "Scheduling attempts of scheduling trees (a root CompositePodGroup and the groups under it) by result.",
		}, []string{"result"}),
		TreeTimeToScheduled: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "lockstep_compositepodgroup_time_to_scheduled_seconds",
			Help:    "Time from a root CompositePodGroup's creation to CompositePodGroupInitiallyScheduled=True.",
			Buckets: []float64{0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200},
		}),
		AlgorithmDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "lockstep_scheduling_algorithm_duration_seconds",
			Help:    "Time of the snapshot and the decision of one attempt, without its API writes (the preemption search included when the unit does not fit).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}),
		KindServed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lockstep_scheduler_kind_served",
			Help: "1 for each of Lockstep's kinds (and, with --karpenter, Karpenter's NodeClaims) the scheduler watches, 0 for one the API server does not serve (its CRD is missing: apply the chart's crds/, or install Karpenter), by resource.",
		}, []string{"resource"}),
	}
	m.Registry.MustRegister(m.Attempts, m.AttemptDuration, m.TimeToScheduled, m.DeviceAllocationFailures, m.WriteErrors,
		m.Preemptions, m.PreemptionVictims, m.TreeAttempts, m.TreeTimeToScheduled, m.AlgorithmDuration, m.KindServed,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, r := range []string{ResultScheduled, ResultUnschedulable, ResultError} {
		m.Attempts.WithLabelValues(r)
		m.TreeAttempts.WithLabelValues(r)
	}
	return m
}

// Integrity holds the gang integrity controller's metrics (lockstep
// controllers serves them with controller-runtime's).
type Integrity struct {
	// GangRestarts counts gangs taken down whole because a member was
	// lost, by reason.
	GangRestarts *prometheus.CounterVec
	// UnhealthyDevices counts members found on a device their kubelet
	// reports Unhealthy and acted on (their gang restarted, or they were
	// taken down alone), by what reported it: the DRA driver, or the
	// device plugin's extended resource.
	UnhealthyDevices *prometheus.CounterVec
}

// NewIntegrity creates the integrity controller's metrics and registers
// them with reg.
func NewIntegrity(reg prometheus.Registerer) (*Integrity, error) {
	m := &Integrity{
		GangRestarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockstep_gang_restarts_total",
			Help: "Gangs taken down whole because a member was lost, by reason.",
		}, []string{"reason"}),
		UnhealthyDevices: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockstep_unhealthy_devices_total",
			Help: "Gang members found on a device their kubelet reports Unhealthy (pod status allocatedResourcesStatus) and restarted or taken down, by DRA driver or device-plugin resource.",
		}, []string{"resource"}),
	}
	for _, c := range []prometheus.Collector{m.GangRestarts, m.UnhealthyDevices} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// ServeOption adds handlers to the metrics server.
type ServeOption func(*http.ServeMux)

// WithProfiling serves Go's pprof profiles under /debug/pprof/ (as
// kube-scheduler's --profiling does) — off unless asked for: profiles show
// the process's internals to whoever reaches the port.
func WithProfiling() ServeOption {
	return func(mux *http.ServeMux) {
		for path, h := range ProfilingHandlers() {
			mux.Handle(path, h)
		}
	}
}

// ProfilingHandlers are Go's pprof handlers by path, for a server Lockstep
// does not build itself (the webhook's controller-runtime metrics server).
func ProfilingHandlers() map[string]http.Handler {
	return map[string]http.Handler{
		"/debug/pprof/":        http.HandlerFunc(pprof.Index),
		"/debug/pprof/cmdline": http.HandlerFunc(pprof.Cmdline),
		"/debug/pprof/profile": http.HandlerFunc(pprof.Profile),
		"/debug/pprof/symbol":  http.HandlerFunc(pprof.Symbol),
		"/debug/pprof/trace":   http.HandlerFunc(pprof.Trace),
	}
}

// Serve exposes /metrics (and /healthz) on addr until ctx ends. An empty
// addr or "0" disables it.
func Serve(ctx context.Context, addr string, reg *prometheus.Registry, opts ...ServeOption) error {
	if addr == "" || addr == "0" {
		return nil
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	for _, o := range opts {
		o(mux)
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "Metrics server stopped")
		}
	}()
	return nil
}
