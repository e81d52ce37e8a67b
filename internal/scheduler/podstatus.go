package scheduler

import (
	"context"
	"encoding/json"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// podStatusWorkers bounds the pod status writes in flight: enough to keep
// up with a gang's members, few enough that the binder's writes are never
// queued behind a large gang's conditions at the API server.
const podStatusWorkers = 4

// giveWayBacklog is how many writes nobody waits on (pod conditions,
// events) may wait before they give way to work someone waits on
// (pace.go): as many as kube-scheduler's client burst lets go at once. A
// few conditions and events — a small gang that does not fit, a
// preemption's — go out at once as they always did; only a large gang's
// thousands wait their turn.
const giveWayBacklog = pacedBurst

// podStatusRetries is how many times a failed write is tried again (each
// try paced like every write) before the wish is dropped; the next cycle
// that decides the pod asks again.
const podStatusRetries = 5

// pacedQPS and pacedBurst pace the events (kube-scheduler's client
// defaults, which pace all of its writes), and are the floor of the pod
// status writes' adaptive pace (pace.go): a gang of thousands that does
// not fit never takes the API server from everyone else's creations and
// bindings, and the scheduler's own decisions, at once.
const (
	pacedQPS   = 50
	pacedBurst = 100
)

// podStatus is the PodScheduled=False condition (and nominated node) the
// scheduler wants a pending pod to show.
type podStatus struct {
	namespace, name string
	reason, message string
	nominated       string
}

// podStatusWriter writes pending pods' PodScheduled conditions off the
// scheduling loop. A cycle only says what each pod should show (set): a pod
// whose wanted status is what it shows, or what was last asked for it, is
// not written again; a newer wish replaces one not yet written; workers
// write the wishes in order, each as one strategic merge patch of the
// pod's status (no read, no conflict). A write that fails (a timeout, an
// API server restart) is tried again, paced, up to podStatusRetries times:
// the unit that asked is parked until something changes, so a dropped wish
// would leave its pod showing a stale reason. A gang of 10,000 members thus costs
// its cycle 10,000 map updates, not 10,000 API calls, and a verdict that
// does not change costs nothing.
//
//	set ──► wanted[uid] (latest wins) ──► FIFO ──► worker: patch status
//	             ▲                                       │
//	             └── last[uid]: what was asked ◄──────────┘
//	                 (dropped when the pod stops pending: forget)
type podStatusWriter struct {
	client kubernetes.Interface
	clock  clock.PassiveClock
	pace   pacer
	// othersWaiting reports whether the scheduler has work someone waits
	// on (Scheduler.foreground): then, with more than backlog wishes
	// waiting, the writes give way (pace.go), whatever the API server's
	// answers allow.
	othersWaiting func() bool
	backlog       int

	mu     sync.Mutex
	cond   *sync.Cond
	wanted map[types.UID]podStatus
	order  []types.UID
	// last is what was last asked for each pending pod (written or not).
	last map[types.UID]podStatus
	// retries counts the failed writes of each pod's current wish.
	retries map[types.UID]int
	// busy counts the writes being made (idle waits for none).
	busy int
}

func newPodStatusWriter(client kubernetes.Interface, clk clock.PassiveClock) *podStatusWriter {
	w := &podStatusWriter{client: client, clock: clk, pace: newAdaptivePace(clk), backlog: giveWayBacklog,
		wanted: map[types.UID]podStatus{}, last: map[types.UID]podStatus{}, retries: map[types.UID]int{}}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// set asks for p to show PodScheduled=False with reason and message, and
// nominated as its nominated node. It reports whether that is news: p does
// not show it and it was not asked for already (then the caller records an
// event).
func (w *podStatusWriter) set(p *corev1.Pod, reason, message, nominated string) bool {
	want := podStatus{namespace: p.Namespace, name: p.Name, reason: reason, message: message, nominated: nominated}
	w.mu.Lock()
	defer w.mu.Unlock()
	if last, ok := w.last[p.UID]; ok && last == want || !ok && shows(p, want) {
		return false
	}
	w.last[p.UID] = want
	delete(w.retries, p.UID)
	if _, queued := w.wanted[p.UID]; !queued {
		w.order = append(w.order, p.UID)
	}
	w.wanted[p.UID] = want
	w.cond.Signal()
	return true
}

// shows reports whether p already shows want.
func shows(p *corev1.Pod, want podStatus) bool {
	if p.Status.NominatedNodeName != want.nominated {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == want.reason && c.Message == want.message
		}
	}
	return false
}

// forget drops what is remembered of a pod that no longer pends (bound or
// deleted); a wish not yet written is dropped too.
func (w *podStatusWriter) forget(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.last, uid)
	delete(w.wanted, uid)
	delete(w.retries, uid)
}

// run writes wishes on podStatusWorkers workers, paced, until ctx ends.
func (w *podStatusWriter) run(ctx context.Context) {
	stop := context.AfterFunc(ctx, func() {
		w.mu.Lock()
		w.cond.Broadcast()
		w.mu.Unlock()
	})
	defer stop()
	var wg sync.WaitGroup
	for i := 0; i < podStatusWorkers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if w.pending() > w.backlog && w.othersWaiting != nil && w.othersWaiting() {
					w.pace.yield()
				} else {
					w.pace.resume()
				}
				if w.pace.Wait(ctx) != nil {
					return
				}
				uid, st, ok := w.next(ctx)
				if !ok {
					return
				}
				w.write(ctx, uid, st)
				w.mu.Lock()
				w.busy--
				w.cond.Broadcast()
				w.mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// next takes the oldest wish, waiting for one.
func (w *podStatusWriter) next(ctx context.Context) (types.UID, podStatus, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		if ctx.Err() != nil {
			return "", podStatus{}, false
		}
		for len(w.order) > 0 {
			uid := w.order[0]
			w.order = w.order[1:]
			if st, ok := w.wanted[uid]; ok {
				delete(w.wanted, uid)
				w.busy++
				return uid, st, true
			}
		}
		w.cond.Wait()
	}
}

// pending is how many wishes are not yet written (queued or being written).
func (w *podStatusWriter) pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.wanted) + w.busy
}

// idle waits until every wish has been written (tests, shutdown).
func (w *podStatusWriter) idle() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.wanted) > 0 || w.busy > 0 {
		w.cond.Wait()
	}
}

// write patches the pod's status: PodScheduled and nominatedNodeName, as
// kube-scheduler's PatchPodStatus does, without reading the pod first.
func (w *podStatusWriter) write(ctx context.Context, uid types.UID, st podStatus) {
	var nominated any = st.nominated
	if st.nominated == "" {
		nominated = nil
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": uid},
		"status": map[string]any{
			"nominatedNodeName": nominated,
			"conditions": []corev1.PodCondition{{
				Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: st.reason, Message: st.message,
				LastTransitionTime: metav1.NewTime(w.clock.Now()),
			}},
		},
	})
	if err == nil {
		start := w.clock.Now()
		_, err = w.client.CoreV1().Pods(st.namespace).Patch(ctx, st.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
		w.pace.observe(w.clock.Since(start), err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil || podReplaced(err) {
		// Written; or the pod is gone, or replaced by one of the same
		// name (the patch's uid differs): nothing more to write.
		delete(w.retries, uid)
		return
	}
	logger := klog.FromContext(ctx)
	_, newer := w.wanted[uid]
	switch {
	case newer || w.last[uid] != st:
		// A newer wish replaced this one, or the pod stopped pending.
	case w.retries[uid] < podStatusRetries:
		// A timeout, an API server restart, throttling: try again, paced.
		w.retries[uid]++
		logger.V(2).Info("Writing pod condition failed; trying again", "pod", klog.KRef(st.namespace, st.name), "attempt", w.retries[uid], "err", err)
		w.wanted[uid] = st
		w.order = append(w.order, uid)
		w.cond.Signal()
	default:
		logger.Error(err, "Writing pod condition failed; the next cycle that decides the pod asks again", "pod", klog.KRef(st.namespace, st.name), "attempts", w.retries[uid]+1)
		delete(w.retries, uid)
		delete(w.last, uid)
	}
}
