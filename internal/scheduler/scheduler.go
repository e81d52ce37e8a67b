package scheduler

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/apidiscovery"
	"github.com/lockstep-dev/lockstep/internal/cachetrim"
	"github.com/lockstep-dev/lockstep/internal/cycle"
	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/features"
	"github.com/lockstep-dev/lockstep/internal/kubefilter"
	"github.com/lockstep-dev/lockstep/internal/kueuecheck"
	"github.com/lockstep-dev/lockstep/internal/metrics"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/provision"
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
	// Features the decisions follow; the zero value means kube-scheduler
	// 1.37's (features.Default).
	Features features.Features
	// Clock times nominations, binding conditions, assumptions and
	// backoff; nil means the real clock.
	Clock clock.WithTickerAndDelayedExecution
	// CrashAfterBinds is a fault-test hook (the hidden flag
	// --test-crash-after-binds): when set to N, the process exits right
	// after its N-th successful binding (0: after the claim phase, before
	// any binding). nil: off. Fault tests prove crash safety with it.
	CrashAfterBinds *int64
	// KueuePlacementCheck answers Kueue's AdmissionChecks of
	// controllerName scheduling.lockstep.dev/placement (kueuecheck): on
	// where Kueue's API is served.
	KueuePlacementCheck bool
	// Karpenter cooperates with Karpenter (--karpenter): every member of a
	// gang is bound with karpenter.sh/do-not-disrupt, so that voluntary
	// disruption (consolidation, drift) never drains one rank of a running
	// gang; the member lets its node go when it ends.
	Karpenter bool
	// KarpenterInstanceTypes are the instance types Lockstep may ask
	// Karpenter for (--karpenter-instance-types): with --karpenter and
	// Karpenter's API served, a gang that does not fit gets its missing
	// nodes as one request of NodeClaims (package provision).
	KarpenterInstanceTypes []provision.InstanceType
	// ProvisionTimeout bounds how long a request's nodes have to become
	// ready before they are all released (0: DefaultProvisionTimeout).
	ProvisionTimeout time.Duration
	// MinRuntime is the minimum runtime of units by their pods'
	// PriorityClass (--min-runtime): none is a preemption victim before it
	// has run that long; a group's lockv1.MinRuntimeAnnotation wins.
	MinRuntime map[string]time.Duration
	// PreemptionNotice is the notice units get by their pods'
	// PriorityClass when chosen as victims: marked PreemptionPending, they
	// are evicted when they acknowledge or it ends; a group's
	// lockv1.PreemptionNoticeAnnotation wins.
	PreemptionNotice map[string]time.Duration
	// PreemptionDelay is how long units wait by their pods'
	// PriorityClass before they preempt; a group's
	// lockv1.PreemptionDelayAnnotation wins.
	PreemptionDelay map[string]time.Duration
	// PreemptionShortWait bounds how long a unit waits for running pods
	// that declared their end instead of preempting (0: never).
	PreemptionShortWait time.Duration
}

// Scheduler schedules every pod whose schedulerName is lockstep.
type Scheduler struct {
	opts      Options
	client    kubernetes.Interface
	dynamic   dynamic.Interface
	factory   informers.SharedInformerFactory
	dynFactor dynamicinformer.DynamicSharedInformerFactory
	listers   listers
	queue     unitQueue
	clock     clock.WithTickerAndDelayedExecution
	// state is what cycles decide from (internal/cycle): the cache with
	// the decisions being written (assumed) applied, kube-scheduler's own
	// pod filters, the nominations.
	state  *cycle.State
	binder *binder
	// podStatus writes pending pods' conditions off the scheduling loop.
	podStatus *podStatusWriter
	// bindSlots and bindings: the binding cycles in flight (goBind).
	bindSlots chan struct{}
	bindings  sync.WaitGroup
	recorder  events.EventRecorder
	broadcast events.EventBroadcaster
	// upstreamServed: the API server serves scheduling.k8s.io/v1beta1
	// podgroups; upstreamCompositesServed, v1alpha3 compositepodgroups.
	upstreamServed, upstreamCompositesServed bool
	// compositesServed: Lockstep's CompositePodGroups are served (their CRD
	// is installed); without them the scheduler starts and schedules
	// everything else.
	compositesServed bool
	// taintRulesServed: the API server serves resource.k8s.io/v1 devicetaintrules.
	taintRulesServed bool
	// kueueServed: Kueue's API is served; kueueCheck: and the placement
	// check is on. localQueues name the ClusterQueue a unit Kueue holds
	// waits for.
	kueueServed, kueueCheck bool
	localQueues             localQueues
	// paced are the workloads whose placement check waits (retryPace)
	// because nothing else waited in their ClusterQueue: a workload that
	// starts waiting there has them answered at once.
	paced pacedChecks
	// shortfalls remember what more nodes would make units fit.
	shortfalls shortfalls
	// beyond remembers the units parked beyond capacity (beyond.go); the
	// scheduling loop alone reads and writes it.
	beyond map[queue.Key]beyondMemo
	// priorities remembers each group's priority between its members'
	// events (priority.go).
	priorities groupPriorities
	// arriving is until when (Unix nanoseconds) a unit's members or claims
	// are taken to be arriving (foreground).
	arriving atomic.Int64
	// notices are the victims given preemption notice, by preemptor.
	notices notices
	// interrupts are the gangs told their node goes.
	interrupts interruptions
	// provisioner asks Karpenter for gangs' missing nodes (nil: off, or
	// Karpenter's API not served yet: enableKarpenter sets it).
	provisioner atomic.Pointer[provisioner]
	metrics     *metrics.Scheduler
	// handlers report whether the event handlers feeding the cache have
	// seen every object the informers listed.
	handlers []cache.InformerSynced
	// synced is set once every cache has synced (readiness).
	synced atomic.Bool
	// watchdog reports a leader that stopped renewing its lease (liveness).
	watchdog *leaderelection.HealthzAdaptor
}

// unitQueue is what the scheduler asks of its queue (queue.Queue): each
// cycle ends in exactly one transition (Done, Unschedulable, Wait,
// WaitFor, Retry, BeyondCapacity) of the unit it popped.
type unitQueue interface {
	Add(queue.Key)
	MoveAllToActive()
	CapacityChanged()
	CapacityGeneration() uint64
	Pop(context.Context) (queue.Item, bool)
	Done(queue.Key)
	Unschedulable(queue.Key)
	BeyondCapacity(queue.Key, time.Duration)
	Wait(queue.Key)
	WaitPaced(queue.Key, time.Duration)
	WaitFor(queue.Key, time.Duration)
	Retry(queue.Key)
	Len() (active, parked int)
}

var _ unitQueue = (*queue.Queue)(nil)

// New wires informers, queue and binder; nothing runs until Run.
func New(client kubernetes.Interface, dyn dynamic.Interface, opts Options) (*Scheduler, error) {
	if opts.Identity == "" {
		host, _ := os.Hostname()
		opts.Identity = fmt.Sprintf("%s_%d", host, os.Getpid())
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Features == (features.Features{}) {
		opts.Features = features.Default()
	}
	s := &Scheduler{
		opts:      opts,
		client:    client,
		dynamic:   dyn,
		factory:   informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(cachetrim.Transform)),
		dynFactor: dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0),
		clock:     opts.Clock,
		bindSlots: make(chan struct{}, maxBindingUnits),
		metrics:   metrics.NewScheduler(),
	}
	s.state = &cycle.State{Cache: snapshot.NewCache(time.Minute, opts.Features, opts.Clock), CEL: dra.NewCache(), Clock: opts.Clock}
	crashAt := int64(-1)
	if opts.CrashAfterBinds != nil {
		crashAt = *opts.CrashAfterBinds
	}
	s.binder = newBinder(client, s.state.Cache, opts.Clock, crashAt)
	s.podStatus = newPodStatusWriter(client, opts.Clock)
	s.podStatus.othersWaiting = s.foreground
	s.queue = queue.New(opts.Clock, s.order)
	s.broadcast = events.NewBroadcaster(newPacedSink(&events.EventSinkImpl{Interface: client.EventsV1()}, s.eventsGiveWay))
	s.recorder = s.broadcast.NewRecorder(podgroup.Scheme(), "lockstep-scheduler")
	served, err := apidiscovery.Serves(client.Discovery(), podgroup.UpstreamResource.GroupVersion().String(), podgroup.UpstreamResource.Resource)
	if err != nil {
		return nil, err
	}
	s.upstreamServed = served
	if s.upstreamCompositesServed, err = apidiscovery.Serves(client.Discovery(), podgroup.UpstreamCompositeResource.GroupVersion().String(), podgroup.UpstreamCompositeResource.Resource); err != nil {
		return nil, err
	}
	if s.compositesServed, err = apidiscovery.Serves(client.Discovery(), podgroup.CompositeResource.GroupVersion().String(), podgroup.CompositeResource.Resource); err != nil {
		return nil, err
	}
	s.metrics.KindServed.WithLabelValues(podgroup.CompositeResource.GroupResource().String()).Set(served01(s.compositesServed))
	if !s.compositesServed {
		klog.Background().Error(nil, "CompositePodGroups are not served: starting without them; scheduling trees wait until the CRD is installed and the scheduler restarted (apply the chart's crds/, which `helm upgrade` does not)",
			"resource", podgroup.CompositeResource.String())
	}
	if s.taintRulesServed, err = apidiscovery.Serves(client.Discovery(), "resource.k8s.io/v1", "devicetaintrules"); err != nil {
		return nil, err
	}
	if s.kueueServed, err = kueueServed(client.Discovery()); err != nil {
		return nil, err
	}
	s.kueueCheck = s.kueueServed && opts.KueuePlacementCheck
	if opts.KueuePlacementCheck && !s.kueueServed {
		klog.Background().Info("Kueue's API is not served yet: the placement check starts once it is (discovery is asked every 30s)", "resource", kueuecheck.WorkloadResource.String())
	}
	if err := s.setupInformers(); err != nil {
		return nil, err
	}
	if err := s.setupKarpenter(); err != nil {
		return nil, err
	}
	if s.state.Filters, err = kubefilter.New(context.Background(), s.factory, client); err != nil {
		return nil, err
	}
	s.metrics.Registry.MustRegister(pendingCollector{s}, domainCollector{s})
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
	if err := s.watch(ctx); err != nil {
		return err
	}
	go s.podStatus.run(ctx)
	if !s.kueueServed {
		go s.enableKueue(ctx, kueueDiscoveryInterval)
	}
	if s.opts.Karpenter && len(s.opts.KarpenterInstanceTypes) > 0 && s.provisioner.Load() == nil {
		go s.enableKarpenter(ctx, karpenterDiscoveryInterval)
	}
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

// watch starts the informers feeding the cycle state and the listers,
// and returns once every one has synced.
func (s *Scheduler) watch(ctx context.Context) error {
	watched, err := cycle.Watch(ctx, s.factory, s.client, s.state.Cache, cycle.WatchOptions{TaintRules: s.taintRulesServed, Hooks: s.wakeups()})
	if err != nil {
		return err
	}
	s.handlers = append(s.handlers, watched.Synced...)
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
	if !cache.WaitForCacheSync(ctx.Done(), s.handlers...) {
		return fmt.Errorf("scheduling cache did not sync")
	}
	s.synced.Store(true)
	return nil
}

// lead recovers, queues every pending pod, and runs the scheduling loop.
func (s *Scheduler) lead(ctx context.Context) error {
	if err := s.recover(ctx); err != nil {
		return fmt.Errorf("start-up recovery: %w", err)
	}
	pods, err := s.listers.pods.List(labels.Everything())
	if err != nil {
		return err
	}
	// The nominations a predecessor held (status.nominatedNodeName) hold
	// until each preemptor's first cycle here plans again.
	if n := cycle.RestoreNominations(s.state.Cache, pods, s.unitOf, s.clock.Now().Add(nominationSlack)); n > 0 {
		klog.FromContext(ctx).Info("Restored nominations from pod status", "units", n)
	}
	unitKey := s.unitKeys()
	for _, p := range pods {
		if podgroup.Ours(p) && podgroup.Pending(p) {
			s.queue.Add(unitKey(p))
		}
	}
	// Every group once, so bound members left unrecorded by a crash are
	// recorded (scheduleOne) before the integrity controller judges them.
	groups, err := s.listers.podGroups.List(labels.Everything())
	if err != nil {
		return err
	}
	for _, g := range groups {
		s.queue.Add(queue.GroupKey(g.GetNamespace(), g.GetName()))
	}
	if s.opts.Karpenter {
		go s.sweepProvisioning(ctx)
	}
	go s.sweepNotices(ctx)
	go s.watchInterruptions(ctx)
	defer s.bindings.Wait()
	for {
		it, ok := s.queue.Pop(ctx)
		if !ok {
			return nil
		}
		s.scheduleOne(ctx, it)
	}
}

// order gives the queue a unit's priority and age.
func (s *Scheduler) order(k queue.Key) (int32, time.Time) {
	if k.Kind == queue.Workload || k.Kind == queue.Check {
		return s.kueueOrder(k)
	}
	if k.Kind == queue.Tree {
		return s.treeOrder(k)
	}
	if k.Kind == queue.Group {
		if pg, err := s.podGroup(k.Namespace, k.Name); err == nil {
			return s.groupPriority(pg), pg.CreationTimestamp.Time
		}
		return 0, time.Time{}
	}
	p, err := s.listers.pods.Pods(k.Namespace).Get(k.Name)
	if err != nil {
		return 0, time.Time{}
	}
	return corev1helpers.PodPriority(p), p.CreationTimestamp.Time
}

// unitOf names a pod's unit and gives its priority (restored nominations).
func (s *Scheduler) unitOf(p *corev1.Pod) (string, int32) {
	k := s.unitKey(p)
	prio, _ := s.order(k)
	return k.String(), prio
}

// groupPriority is the group's members' priority (podgroup.Priority), as
// remembered between their events (priority.go), else from the pod cache.
func (s *Scheduler) groupPriority(pg *lockv1.PodGroup) int32 {
	return s.priorities.get(types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name}, func() []*corev1.Pod {
		pods, _ := s.groupPods(pg.Namespace, pg.Name)
		return pods
	})
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// podReplaced reports whether a write to a pod that named the pod's uid
// failed because that pod is gone: not found; replaced by a pod of the same
// name, which the API server tells as an invalid patch (metadata.uid is
// immutable) or, for a delete's uid precondition, a conflict. Only for
// patches and uid-conditioned deletes: after an update that carries a
// resourceVersion, a conflict means the pod changed, not that it is gone.
func podReplaced(err error) bool {
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return true
	}
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Field == "metadata.uid" {
			return true
		}
	}
	return false
}

// ignoreReplaced is nil when err says the pod written is gone (podReplaced).
func ignoreReplaced(err error) error {
	if podReplaced(err) {
		return nil
	}
	return err
}

// served01 is a served flag as a gauge value.
func served01(served bool) float64 {
	if served {
		return 1
	}
	return 0
}
