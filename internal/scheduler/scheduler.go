package scheduler

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/apidiscovery"
	"github.com/lockstep-dev/lockstep/internal/cachetrim"
	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/kubefilter"
	"github.com/lockstep-dev/lockstep/internal/metrics"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/queue"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// Options configure the scheduler.
type Options struct {
	// LeaderElect turns on leader election; only the leader schedules.
	LeaderElect bool
	// LeaseNamespace and LeaseName name the coordination Lease.
	LeaseNamespace, LeaseName string
	// Identity is this replica's name in the Lease (default hostname_pid).
	Identity string
	// LeaseDuration, RenewDeadline, RetryPeriod as in kube-scheduler.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// MetricsAddr serves /metrics; empty or "0" disables it.
	MetricsAddr string
	// Profiling also serves Go's pprof profiles on MetricsAddr.
	Profiling bool
	// HealthAddr serves /healthz (alive; while leading, the lease is being
	// renewed) and /readyz (caches synced); empty or "0" disables it.
	HealthAddr string
	// LeaderElectionClient renews the Lease on a client of its own, so a
	// burst of scheduling writes never holds its renewal back (a lost lease
	// under load is a failover). nil uses the scheduler's client.
	LeaderElectionClient kubernetes.Interface
}

// Scheduler schedules every pod whose schedulerName is lockstep.
type Scheduler struct {
	opts      Options
	client    kubernetes.Interface
	dynamic   dynamic.Interface
	factory   informers.SharedInformerFactory
	dynFactor dynamicinformer.DynamicSharedInformerFactory
	listers   listers
	queue     *queue.Queue
	// cache is the cluster state cycles decide from, with the decisions
	// being written (assumed) applied.
	cache  *snapshot.Cache
	noms   nominations
	binder *binder
	// bindSlots and bindings: the binding cycles in flight (goBind).
	bindSlots chan struct{}
	bindings  sync.WaitGroup
	celCache  *cel.Cache
	// filters are kube-scheduler's own InterPodAffinity and
	// PodTopologySpread, run on every cycle's snapshot.
	filters   *kubefilter.Filters
	recorder  events.EventRecorder
	broadcast events.EventBroadcaster
	// upstreamServed: the API server serves scheduling.k8s.io/v1beta1 podgroups.
	upstreamServed bool
	// taintRulesServed: the API server serves resource.k8s.io/v1 devicetaintrules.
	taintRulesServed bool
	// slices are the ResourceSlices with DeviceTaintRules applied (the
	// tracker kube-scheduler uses); set in Run.
	slices  *tracker.Tracker
	metrics *metrics.Scheduler
	// handlers report whether the event handlers feeding the cache have
	// seen every object the informers listed.
	handlers []cache.InformerSynced
	// synced is set once every cache has synced (readiness).
	synced atomic.Bool
	// watchdog reports a leader that stopped renewing its lease (liveness).
	watchdog *leaderelection.HealthzAdaptor
}

// New wires informers, queue and binder; nothing runs until Run.
func New(client kubernetes.Interface, dyn dynamic.Interface, opts Options) (*Scheduler, error) {
	if opts.Identity == "" {
		host, _ := os.Hostname()
		opts.Identity = fmt.Sprintf("%s_%d", host, os.Getpid())
	}
	s := &Scheduler{
		opts:      opts,
		client:    client,
		dynamic:   dyn,
		factory:   informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(cachetrim.Transform)),
		dynFactor: dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0),
		cache:     snapshot.NewCache(time.Minute),
		bindSlots: make(chan struct{}, maxBindingUnits),
		celCache:  dra.NewCache(),
		metrics:   metrics.NewScheduler(),
	}
	s.binder = newBinder(client, s.cache)
	s.queue = queue.New(clock.RealClock{}, s.order)
	s.broadcast = events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	s.recorder = s.broadcast.NewRecorder(podgroup.Scheme(), "lockstep-scheduler")
	served, err := apidiscovery.Serves(client.Discovery(), podgroup.UpstreamResource.GroupVersion().String(), podgroup.UpstreamResource.Resource)
	if err != nil {
		return nil, err
	}
	s.upstreamServed = served
	if s.taintRulesServed, err = apidiscovery.Serves(client.Discovery(), "resource.k8s.io/v1", "devicetaintrules"); err != nil {
		return nil, err
	}
	if err := s.setupInformers(); err != nil {
		return nil, err
	}
	if s.filters, err = kubefilter.New(context.Background(), s.factory, client); err != nil {
		return nil, err
	}
	s.metrics.Registry.MustRegister(pendingCollector{s})
	return s, nil
}

// Run starts the informers and, once leader (or at once without leader
// election), recovers from any crash and schedules until ctx ends.
func (s *Scheduler) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	if err := s.broadcast.StartRecordingToSinkWithContext(ctx); err != nil {
		return err
	}
	var serveOpts []metrics.ServeOption
	if s.opts.Profiling {
		serveOpts = append(serveOpts, metrics.WithProfiling())
	}
	if err := metrics.Serve(ctx, s.opts.MetricsAddr, s.metrics.Registry, serveOpts...); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	s.watchdog = leaderelection.NewLeaderHealthzAdaptor(s.opts.RenewDeadline + 5*time.Second)
	if err := s.serveHealth(ctx); err != nil {
		return fmt.Errorf("health probes: %w", err)
	}
	defer s.broadcast.Shutdown()
	if err := s.startSliceTracker(ctx); err != nil {
		return err
	}
	s.factory.Start(ctx.Done())
	s.dynFactor.Start(ctx.Done())
	for typ, ok := range s.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("cache for %v did not sync", typ)
		}
	}
	for typ, ok := range s.dynFactor.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("cache for %v did not sync (are Lockstep's CRDs installed?)", typ)
		}
	}
	if !cache.WaitForCacheSync(ctx.Done(), s.slices.HasSynced) {
		return fmt.Errorf("ResourceSlice tracker did not sync")
	}
	if !cache.WaitForCacheSync(ctx.Done(), s.handlers...) {
		return fmt.Errorf("scheduling cache did not sync")
	}
	s.synced.Store(true)
	logger.Info("Caches synced", "identity", s.opts.Identity, "deviceTaintRules", s.taintRulesServed)
	if !s.opts.LeaderElect {
		return s.lead(ctx)
	}
	leClient := s.opts.LeaderElectionClient
	if leClient == nil {
		leClient = s.client
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, s.opts.LeaseNamespace, s.opts.LeaseName,
		leClient.CoreV1(), leClient.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: s.opts.Identity})
	if err != nil {
		return err
	}
	var runErr error
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   s.opts.LeaseDuration,
		RenewDeadline:   s.opts.RenewDeadline,
		RetryPeriod:     s.opts.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            s.opts.LeaseName,
		WatchDog:        s.watchdog,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				logger.Info("Became leader", "identity", s.opts.Identity)
				runErr = s.lead(ctx)
			},
			OnStoppedLeading: func() {
				logger.Info("Stopped leading", "identity", s.opts.Identity)
			},
		},
	})
	if runErr == nil && ctx.Err() == nil {
		// Lost the lease without being asked to stop: exit so a fresh
		// process (with fresh assumptions) competes again.
		return fmt.Errorf("leader election lost")
	}
	return runErr
}

// lead recovers, queues every pending pod, and runs the scheduling loop.
func (s *Scheduler) lead(ctx context.Context) error {
	if err := s.recover(ctx); err != nil {
		return fmt.Errorf("start-up recovery: %w", err)
	}
	pods, err := s.listers.pods.List(everything)
	if err != nil {
		return err
	}
	for _, p := range pods {
		if podgroup.Ours(p) && podgroup.Pending(p) {
			s.queue.Add(unitKey(p))
		}
	}
	// Every group once, so bound members left unrecorded by a crash are
	// recorded (scheduleOne) before the integrity controller judges them.
	groups, err := s.listers.podGroups.List(everything)
	if err != nil {
		return err
	}
	for _, g := range groups {
		s.queue.Add(groupKey(g.GetNamespace(), g.GetName()))
	}
	defer s.bindings.Wait()
	for {
		k, ok := s.queue.Pop(ctx)
		if !ok {
			return nil
		}
		s.scheduleOne(ctx, k)
	}
}

// order gives the queue a unit's priority and age.
func (s *Scheduler) order(k queue.Key) (int32, time.Time) {
	kind, ns, name, err := parseKey(k)
	if err != nil {
		return 0, time.Time{}
	}
	if kind+"/" == groupKeyPrefix {
		if pg, err := s.podGroup(ns, name); err == nil {
			return s.groupPriority(pg), pg.CreationTimestamp.Time
		}
		return 0, time.Time{}
	}
	p, err := s.listers.pods.Pods(ns).Get(name)
	if err != nil {
		return 0, time.Time{}
	}
	return corev1helpers.PodPriority(p), p.CreationTimestamp.Time
}

// groupPriority is the group's members' priority (podgroup.Priority), from
// the pod cache.
func (s *Scheduler) groupPriority(pg *lockv1.PodGroup) int32 {
	objs, err := s.listers.podIndex.ByIndex(groupIndex, pg.Namespace+"/"+pg.Name)
	if err != nil {
		return 0
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		pods = append(pods, o.(*corev1.Pod))
	}
	prio, _ := podgroup.Priority(pods)
	return prio
}

var everything = labelsEverything()

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
