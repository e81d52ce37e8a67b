package integrations

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/integrity"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// heldWords are the words of a gang Kueue holds in namespace ns's queue
// (kueueQueue: LocalQueue team of ClusterQueue ns).
func heldWords(ns string) string {
	return "waiting for Kueue admission in ClusterQueue " + ns + " (LocalQueue " + ns + "/team)"
}

// A gang Kueue holds for quota is not demand on the cluster: a 4-rank Job
// (suspended by Kueue: no pods) and a Kueue pod group of 4 pods (gated by
// Kueue) in a queue with 2 GPUs of quota. For 20 s neither group's pods
// are ever marked Unschedulable (no FailedScheduling either), and each
// PodGroup says it waits for Kueue's admission in the ClusterQueue — the
// Job's in its Running condition (the integrity controller's: the job has
// no pods), the pod group's in PodGroupInitiallyScheduled (the
// scheduler's, reason SchedulingGated). With the quota raised both are
// admitted and bound whole.
func TestKueueHeldGangIsNotDemand(t *testing.T) {
	h := harness.Get(t)
	ctx := harness.Context(t, 4*time.Minute)
	ns := kueuePodsNamespace(t, ctx, h, 2)
	createQueuedJob(t, ctx, h, ns, "train", 4, nil, nil)
	for i := range 4 {
		if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, kueueGroupPod(ns, "infer", i, 4, "1h"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want := heldWords(ns)
	// held says whether both gangs are held as they must be; a pod marked
	// Unschedulable is an error.
	held := func(ctx context.Context) (bool, string, error) {
		job, err := h.Client.BatchV1().Jobs(ns).Get(ctx, "train", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		gated := 0
		for _, p := range pods.Items {
			if c := podgroup.PodCondition(&p, corev1.PodScheduled); c != nil && c.Reason == corev1.PodReasonUnschedulable {
				return false, "", fmt.Errorf("pod %s of a gang Kueue holds is marked Unschedulable: %s", p.Name, c.Message)
			}
			if podgroup.Gated(&p) && p.Labels[podgroup.KueueGroupLabel] == "infer" {
				gated++
			}
		}
		train, err := h.PodGroup(ctx, ns, "train")
		if err != nil {
			return false, "", err
		}
		infer, err := h.ScheduledCondition(ctx, ns, "infer")
		if err != nil {
			return false, "", err
		}
		running := meta.FindStatusCondition(train.Status.Conditions, lockv1.Running)
		ok := ptr.Deref(job.Spec.Suspend, false) && gated == 4 && len(pods.Items) == 4 &&
			running != nil && running.Reason == lockv1.RunningReasonSuspended && strings.Contains(running.Message, want) &&
			infer != nil && infer.Reason == lockv1.PodGroupReasonSchedulingGated && strings.HasPrefix(infer.Message, want+": 4 members are gated")
		return ok, fmt.Sprintf("Job suspended %v; %d pods, %d of infer gated; train Running %v; infer %v", ptr.Deref(job.Spec.Suspend, false), len(pods.Items), gated, running, infer), nil
	}
	harness.Eventually(t, ctx, "both gangs held, each PodGroup naming the ClusterQueue whose admission it waits for", held)
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Second) {
		if ok, state, err := held(ctx); err != nil || !ok {
			t.Fatalf("a held gang changed while Kueue held it: %s (%v)", state, err)
		}
	}
	r := h.Explain(t, ns, "podgroup", "infer")
	if !strings.Contains(r.Answer, "waiting for Kueue admission in ") {
		t.Errorf("explain podgroup infer: want the words of a gang Kueue holds, got %q", r.Answer)
	}

	raiseQuota(t, ctx, h, ns, 8)
	harness.Eventually(t, ctx, "both admitted and bound 4/4 once the quota is raised", func(ctx context.Context) (bool, string, error) {
		_, train, err := jobPods(ctx, h, ns, "train")
		if err != nil {
			return false, "", err
		}
		infer, err := kueueGroupState(ctx, h, ns, "infer")
		return len(train) == 4 && infer.bound == 4, fmt.Sprintf("train: %d bound; infer: %s", len(train), infer), err
	})
	evs, err := h.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedScheduling"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		t.Errorf("%s %s: FailedScheduling: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
	}
	for _, g := range []string{"train", "infer"} {
		h.NoLifecycleRestart(t, ctx, ns, g)
	}
}

// A Kueue preemption evicts a gang whole: a ClusterQueue with quota for
// one 4-GPU gang that preempts by priority within it, a low-priority
// 4-rank Job running bound, then a high-priority one. Kueue evicts the low
// Workload and suspends its Job; the Job controller deletes the pods, all
// of them together — no rank stays running while others are gone — and
// Lockstep records a stop, not a loss (incarnation ended OwnerStopped, no
// gang restart, nothing evicted by Lockstep), its PodGroup naming the
// ClusterQueue whose admission it waits for again; the high gang binds
// whole. Once the high Job is deleted the low one is admitted again and
// runs whole as its next incarnation.
func TestKueuePreemptionEvictsGangWhole(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 5*time.Minute)
	kueueQueueSpec(t, ctx, h, ns, clusterQueue(ns, ns, 4)+"  preemption:\n    withinClusterQueue: LowerPriority\n")
	for name, value := range map[string]int{ns + "-low": 10, ns + "-high": 1000} {
		applyKueue(t, ctx, h, "workloadpriorityclasses", "", fmt.Sprintf("apiVersion: kueue.x-k8s.io/v1beta2\nkind: WorkloadPriorityClass\nmetadata: {name: %s}\nvalue: %d\n", name, value))
	}
	priority := func(class string) map[string]string {
		return map[string]string{"kueue.x-k8s.io/priority-class": ns + "-" + class}
	}
	createQueuedJob(t, ctx, h, ns, "low", 4, nil, priority("low"))
	h.WaitRunning(t, ctx, ns, "low", 4)

	w := watchGang(t, ctx, h, ns, "low", 4)
	createQueuedJob(t, ctx, h, ns, "high", 4, nil, priority("high"))
	harness.Eventually(t, ctx, "Kueue evicts the low Job (suspended, its pods gone) and the high one is bound 4/4", func(ctx context.Context) (bool, string, error) {
		wl, err := workloadOf(ctx, h, ns, "low")
		if err != nil || wl == nil {
			return false, "no workload yet", err
		}
		job, err := h.Client.BatchV1().Jobs(ns).Get(ctx, "low", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		low, _, err := jobPods(ctx, h, ns, "low")
		if err != nil {
			return false, "", err
		}
		_, high, err := jobPods(ctx, h, ns, "high")
		evicted := conditionTrue(wl, "Evicted") || conditionTrue(wl, "Preempted")
		return evicted && ptr.Deref(job.Spec.Suspend, false) && len(low) == 0 && len(high) == 4,
			fmt.Sprintf("low: evicted %v, suspended %v, %d pods; high: %d bound", evicted, ptr.Deref(job.Spec.Suspend, false), len(low), len(high)), err
	})
	w.check(t)
	st, err := h.State(ctx, ns, "low")
	if err != nil {
		t.Fatal(err)
	}
	if inc := st.Incarnation; inc == nil || inc.Number != 1 || inc.Ended == nil || inc.Ended.Reason != integrity.ReasonOwnerStopped ||
		st.RunningReason() != lockv1.RunningReasonSuspended || !strings.Contains(st.Running.Message, heldWords(ns)) {
		t.Errorf("low's PodGroup: want incarnation 1 ended %s, Running %s naming the ClusterQueue, got %s", integrity.ReasonOwnerStopped, lockv1.RunningReasonSuspended, st)
	}
	h.NoLifecycleRestart(t, ctx, ns, "low")
	h.NoLifecycleRestart(t, ctx, ns, "high")

	if err := h.Client.BatchV1().Jobs(ns).Delete(ctx, "high", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	h.WaitRunning(t, ctx, ns, "low", 4)
	if st, err = h.State(ctx, ns, "low"); err != nil || st.Incarnation == nil || st.Incarnation.Number != 2 || len(st.Restarts) > 0 {
		t.Errorf("low, admitted again: want it running whole as incarnation 2, no restart; got %s (%v)", st, err)
	}
}

// gangWatch follows a running gang's pods from a watch, event by event:
// how many are live (bound, not terminating, not finished) after each.
type gangWatch struct {
	mu   sync.Mutex
	size int
	// partialSince is when the gang was last seen partly live (0 < live <
	// size; zero when it is not); longest is the longest such stretch.
	partialSince time.Time
	longest      time.Duration
	// rebound: a pod became live after the gang had started to go.
	rebound []string
	live    int
	// stop ends the watch.
	stop context.CancelFunc
}

// partialLimit is how long a gang may be seen partly live while it goes:
// the Job controller deletes its pods one API call each, in parallel, so
// a watch sees them go one by one within a moment; a rank left running
// beside gone ones would stay.
const partialLimit = 2 * time.Second

// watchGang watches group's pods (size of them live now) until check.
func watchGang(t *testing.T, ctx context.Context, h *harness.Harness, ns, group string, size int) *gangWatch {
	t.Helper()
	ctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	sel := metav1.ListOptions{LabelSelector: lockv1.PodGroupLabel + "=" + group}
	list, err := h.Client.CoreV1().Pods(ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	sel.ResourceVersion = list.ResourceVersion
	wi, err := h.Client.CoreV1().Pods(ns).Watch(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	g := &gangWatch{size: size, stop: stop}
	live := map[string]bool{}
	for i := range list.Items {
		live[list.Items[i].Name] = isLive(&list.Items[i])
	}
	g.observe(live, "")
	go func() {
		defer wi.Stop()
		for ev := range wi.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			was := live[p.Name]
			live[p.Name] = ev.Type != watch.Deleted && isLive(p)
			rebound := ""
			if !was && live[p.Name] {
				rebound = p.Name
			}
			g.observe(live, rebound)
		}
	}()
	return g
}

func isLive(p *corev1.Pod) bool {
	return podgroup.Active(p) && p.DeletionTimestamp == nil
}

func (g *gangWatch) observe(live map[string]bool, rebound string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, l := range live {
		if l {
			n++
		}
	}
	now := time.Now()
	if rebound != "" && (g.live < g.size || !g.partialSince.IsZero()) {
		g.rebound = append(g.rebound, rebound)
	}
	switch partial := n > 0 && n < g.size; {
	case partial && g.partialSince.IsZero():
		g.partialSince = now
	case !partial && !g.partialSince.IsZero():
		g.longest = max(g.longest, now.Sub(g.partialSince))
		g.partialSince = time.Time{}
	}
	g.live = n
}

// check fails the test if the gang was partly live longer than
// partialLimit, if a pod of it came back while it went, or if it is not
// gone now.
func (g *gangWatch) check(t *testing.T) {
	t.Helper()
	g.stop()
	g.mu.Lock()
	defer g.mu.Unlock()
	longest := g.longest
	if !g.partialSince.IsZero() {
		longest = max(longest, time.Since(g.partialSince))
	}
	if longest > partialLimit {
		t.Errorf("the gang was partly running (some ranks bound and live, others gone) for %s", longest.Round(time.Millisecond))
	}
	if len(g.rebound) > 0 {
		t.Errorf("pods %v of the gang were bound again while it was going", g.rebound)
	}
	if g.live != 0 {
		t.Errorf("%d of %d pods of the gang still run", g.live, g.size)
	}
	t.Logf("the gang went whole: partly running for %s at most", longest.Round(time.Millisecond))
}
