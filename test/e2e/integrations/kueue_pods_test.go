package integrations

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/kueuegroup"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// kueuePodsNamespace is a test namespace where Kueue's pod integration is
// on, with a ClusterQueue of gpus example.com/gpu (served by DRA) and a
// LocalQueue "team" in front of it.
func kueuePodsNamespace(t *testing.T, ctx context.Context, h *harness.Harness, gpus int) string {
	t.Helper()
	ns := h.Namespace(t)
	n, err := h.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Labels[devcluster.KueuePodsNamespaceLabel] = "true"
	if _, err := h.Client.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Kueue keeps its finalizer on the pods of a group that has not
	// finished (a deleted pod may be replaced) until its Workload is
	// deleted, Kueue's way to stop a pod group: do so before the namespace
	// goes (cleanups run last first).
	t.Cleanup(func() {
		_ = h.Dynamic.Resource(kueue.WithResource("workloads")).Namespace(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	kueueQueue(t, ctx, h, ns, gpus)
	return ns
}

// kueueGroupPod is rank i of a Kueue pod group of total pods, 1 GPU each,
// that succeeds run after it starts.
func kueueGroupPod(ns, group string, i, total int, run string) *corev1.Pod {
	p := builders.MakePod().Namespace(ns).Name(fmt.Sprintf("%s-%d", group, i)).Scheduler(lockv1.SchedulerName).
		Req(corev1.ResourceCPU, "1").Req(extendedGPU, "1").
		Label("kueue.x-k8s.io/queue-name", "team").Label(kueuegroup.GroupNameLabel, group).
		Annotation(kueuegroup.TotalCountAnnotation, strconv.Itoa(total)).Annotation("sim.lockstep.dev/succeed-after", run).Obj()
	p.Spec.RestartPolicy = corev1.RestartPolicyNever
	return p
}

// kueueGroup is the state of one Kueue group's pods: how many exist, are
// bound, succeeded, still carry Kueue's admission gate, and whether all
// joined the Lockstep PodGroup of the group's name.
type kueueGroup struct {
	pods, bound, succeeded, gated int
	joined                        bool
}

func (g kueueGroup) String() string {
	return fmt.Sprintf("%d pods, %d bound, %d succeeded, %d gated, joined %v", g.pods, g.bound, g.succeeded, g.gated, g.joined)
}

func kueueGroupState(ctx context.Context, h *harness.Harness, ns, group string) (kueueGroup, error) {
	list, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: kueuegroup.GroupNameLabel + "=" + group})
	if err != nil {
		return kueueGroup{}, err
	}
	g := kueueGroup{pods: len(list.Items), joined: len(list.Items) > 0}
	for _, p := range list.Items {
		if p.Spec.NodeName != "" {
			g.bound++
		}
		if p.Status.Phase == corev1.PodSucceeded {
			g.succeeded++
		}
		if slices.ContainsFunc(p.Spec.SchedulingGates, func(s corev1.PodSchedulingGate) bool { return s.Name == kueuegroup.AdmissionGate }) {
			g.gated++
		}
		g.joined = g.joined && p.Labels[lockv1.PodGroupLabel] == group
	}
	return g, nil
}

// checkKueuePodGroup checks that Lockstep made group's PodGroup for the
// Kueue group: a gang of minCount, disrupted whole or pod by pod, owned by
// its pods.
func checkKueuePodGroup(t *testing.T, ctx context.Context, h *harness.Harness, ns, group string, minCount int32, single bool, owners int) {
	t.Helper()
	pg, err := h.PodGroup(ctx, ns, group)
	if err != nil {
		t.Fatal(err)
	}
	gang := pg.Spec.SchedulingPolicy.Gang
	if gang == nil || gang.MinCount != minCount || pg.Labels[kueuegroup.SourceLabel] != group || (pg.Spec.DisruptionMode.Single != nil) != single {
		t.Errorf("PodGroup %s: want a gang of minCount %d made for the Kueue group (single %v), got %+v labels %v", group, minCount, single, pg.Spec, pg.Labels)
	}
	pods := 0
	for _, o := range pg.OwnerReferences {
		if o.Kind == "Pod" {
			pods++
		}
	}
	if pods != owners {
		t.Errorf("PodGroup %s: owned by %d pods, want %d", group, pods, owners)
	}
}

// Kueue's pod groups are Lockstep gangs: two groups of 6 single-GPU pods
// that each train for 30 s, both admitted by Kueue (12 GPUs of quota) on a
// cluster of 8 GPUs → one runs whole, the other holds nothing and its
// PodGroup (made by Lockstep for the Kueue group, one per group) says why;
// once the first has finished the second runs whole, nothing restarted; the
// first group's PodGroup goes with its last pod.
func TestKueuePodGroupsAreGangs(t *testing.T) {
	h := harness.Get(t)
	ctx := harness.Context(t, 4*time.Minute)
	ns := kueuePodsNamespace(t, ctx, h, 12)
	for _, g := range []string{"train-a", "train-b"} {
		for i := range 6 {
			created, err := h.Client.CoreV1().Pods(ns).Create(ctx, kueueGroupPod(ns, g, i, 6, "30s"), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 && !slices.ContainsFunc(created.Spec.SchedulingGates, func(s corev1.PodSchedulingGate) bool { return s.Name == kueuegroup.AdmissionGate }) {
				t.Fatalf("pod %s not gated by Kueue at creation: %+v", created.Name, created.Spec.SchedulingGates)
			}
			if created.Labels[lockv1.PodGroupLabel] != g {
				t.Fatalf("pod %s did not join PodGroup %s at creation: labels %v", created.Name, g, created.Labels)
			}
		}
	}
	var running, waiting string
	harness.Eventually(t, ctx, "Kueue admits both groups; Lockstep binds one 6/6 and the other 0/6 with its PodGroup saying why", func(ctx context.Context) (bool, string, error) {
		a, err := kueueGroupState(ctx, h, ns, "train-a")
		if err != nil {
			return false, "", err
		}
		b, err := kueueGroupState(ctx, h, ns, "train-b")
		if err != nil {
			return false, "", err
		}
		switch {
		case a.bound == 6 && b.bound == 0:
			running, waiting = "train-a", "train-b"
		case b.bound == 6 && a.bound == 0:
			running, waiting = "train-b", "train-a"
		default:
			return false, fmt.Sprintf("train-a: %s; train-b: %s", a, b), nil
		}
		c, err := h.ScheduledCondition(ctx, ns, waiting)
		if err != nil || c == nil {
			return false, fmt.Sprintf("%s waiting, no condition yet", waiting), err
		}
		ok := a.joined && b.joined && a.gated == 0 && b.gated == 0 && c.Reason == lockv1.PodGroupReasonUnschedulable && strings.Contains(c.Message, "no free device")
		return ok, fmt.Sprintf("train-a: %s; train-b: %s; %s: %s: %s", a, b, waiting, c.Reason, c.Message), nil
	})
	pgs, err := h.Dynamic.Resource(lockv1.GroupVersion.WithResource("podgroups")).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pgs.Items) != 2 {
		t.Errorf("want one PodGroup per Kueue group (2), got %d", len(pgs.Items))
	}
	for _, g := range []string{running, waiting} {
		checkKueuePodGroup(t, ctx, h, ns, g, 6, false, 6)
	}
	r := h.Explain(t, ns, "podgroup", waiting)
	if !r.Gang || r.MinCount != 6 || r.Bound != 0 || !strings.Contains(r.Answer, "no free device") {
		t.Errorf("explain podgroup %s: gang %v minCount %d bound %d answer %q", waiting, r.Gang, r.MinCount, r.Bound, r.Answer)
	}
	harness.Eventually(t, ctx, waiting+" bound whole once "+running+" has finished", func(ctx context.Context) (bool, string, error) {
		r, err := kueueGroupState(ctx, h, ns, running)
		if err != nil {
			return false, "", err
		}
		w, err := kueueGroupState(ctx, h, ns, waiting)
		return r.succeeded == 6 && w.bound == 6, fmt.Sprintf("%s: %s; %s: %s", running, r, waiting, w), err
	})
	for _, g := range []string{running, waiting} {
		h.NoLifecycleRestart(t, ctx, ns, g)
	}
	// Kueue lets finished pods go (its workload is finished); the group's
	// PodGroup goes with its last pod.
	if err := h.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: kueuegroup.GroupNameLabel + "=" + running}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, ctx, running+"'s PodGroup gone with its pods", func(ctx context.Context) (bool, string, error) {
		_, err := h.PodGroup(ctx, ns, running)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		r, _ := kueueGroupState(ctx, h, ns, running)
		return false, fmt.Sprintf("%s: %s", running, r), err
	})
}

// statefulSet is a StatefulSet of replicas pods of gpus GPUs each, queued
// in Kueue's LocalQueue "team".
func statefulSet(ns, name string, replicas int32, gpus string, policy appsv1.PodManagementPolicyType) *appsv1.StatefulSet {
	p := builders.MakePod().Scheduler(lockv1.SchedulerName).Req(corev1.ResourceCPU, "1").Label("app", name).Obj()
	if gpus != "" {
		p = builders.MakePod().Scheduler(lockv1.SchedulerName).Req(corev1.ResourceCPU, "1").Req(extendedGPU, gpus).Label("app", name).Obj()
	}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"kueue.x-k8s.io/queue-name": "team"}},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(replicas), PodManagementPolicy: policy,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: p.ObjectMeta, Spec: p.Spec},
		},
	}
}

// stsGroup is the Kueue group of a StatefulSet's pods (Kueue names it and
// labels the pods after creating them) and its pods' state.
func stsGroup(ctx context.Context, h *harness.Harness, ns, name string) (string, kueueGroup, error) {
	list, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil || len(list.Items) == 0 {
		return "", kueueGroup{}, err
	}
	group := list.Items[0].Labels[kueuegroup.GroupNameLabel]
	if group == "" {
		return "", kueueGroup{pods: len(list.Items)}, nil
	}
	g, err := kueueGroupState(ctx, h, ns, group)
	return group, g, err
}

// A StatefulSet Kueue manages is one gang: Kueue labels its pods with their
// group once they exist, and they join the group's Lockstep PodGroup then.
// Two StatefulSets of 3 pods × 2 GPUs, both admitted, on 8 GPUs → one runs
// whole, the other holds nothing; deleting the first lets the second run.
func TestKueueStatefulSetIsAGang(t *testing.T) {
	h := harness.Get(t)
	ctx := harness.Context(t, 4*time.Minute)
	ns := kueuePodsNamespace(t, ctx, h, 12)
	for _, name := range []string{"serve-a", "serve-b"} {
		if _, err := h.Client.AppsV1().StatefulSets(ns).Create(ctx, statefulSet(ns, name, 3, "2", appsv1.ParallelPodManagement), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	groups := map[string]string{}
	var running, waiting string
	harness.Eventually(t, ctx, "one StatefulSet bound 3/3 and the other 0/3, every pod in its Kueue group's PodGroup", func(ctx context.Context) (bool, string, error) {
		var states []string
		bound := map[string]int{}
		for _, name := range []string{"serve-a", "serve-b"} {
			g, st, err := stsGroup(ctx, h, ns, name)
			if err != nil {
				return false, "", err
			}
			if g == "" || st.pods != 3 || !st.joined {
				return false, fmt.Sprintf("%s: group %q, %s", name, g, st), nil
			}
			groups[name], bound[name] = g, st.bound
			states = append(states, fmt.Sprintf("%s (%s): %s", name, g, st))
		}
		switch {
		case bound["serve-a"] == 3 && bound["serve-b"] == 0:
			running, waiting = "serve-a", "serve-b"
		case bound["serve-b"] == 3 && bound["serve-a"] == 0:
			running, waiting = "serve-b", "serve-a"
		default:
			return false, strings.Join(states, "; "), nil
		}
		c, err := h.ScheduledCondition(ctx, ns, groups[waiting])
		if err != nil || c == nil {
			return false, strings.Join(states, "; ") + "; no condition yet", err
		}
		return c.Reason == lockv1.PodGroupReasonUnschedulable, strings.Join(states, "; ") + "; " + c.Reason + ": " + c.Message, nil
	})
	// A serving group: a replica its StatefulSet replaces is not a reason to
	// restart the others.
	checkKueuePodGroup(t, ctx, h, ns, groups[running], 3, true, 3)
	checkKueuePodGroup(t, ctx, h, ns, groups[waiting], 3, true, 3)
	if err := h.Client.AppsV1().StatefulSets(ns).Delete(ctx, running, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, ctx, waiting+" bound whole once "+running+" is deleted", func(ctx context.Context) (bool, string, error) {
		_, st, err := stsGroup(ctx, h, ns, waiting)
		return st.bound == 3 && st.joined, st.String(), err
	})
	h.NoLifecycleRestart(t, ctx, ns, groups[waiting])
}

// A StatefulSet that creates its pods one at a time (podManagementPolicy
// OrderedReady, the default) can never have them all waiting: its Kueue
// group's PodGroup places them one by one and says why, and every pod runs.
func TestKueueOrderedReadyStatefulSetIsPlacedPodByPod(t *testing.T) {
	h := harness.Get(t)
	ctx := harness.Context(t, 3*time.Minute)
	ns := kueuePodsNamespace(t, ctx, h, 4)
	if _, err := h.Client.AppsV1().StatefulSets(ns).Create(ctx, statefulSet(ns, "web", 3, "", appsv1.OrderedReadyPodManagement), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var group string
	harness.Eventually(t, ctx, "all 3 pods bound, one after another", func(ctx context.Context) (bool, string, error) {
		g, st, err := stsGroup(ctx, h, ns, "web")
		group = g
		return g != "" && st.pods == 3 && st.bound == 3 && st.joined, fmt.Sprintf("group %q: %s", g, st), err
	})
	pg, err := h.PodGroup(ctx, ns, group)
	if err != nil {
		t.Fatal(err)
	}
	if pg.Spec.SchedulingPolicy.Basic == nil {
		t.Errorf("PodGroup %s: want basic (pod by pod), got %+v", group, pg.Spec.SchedulingPolicy)
	}
	events, err := h.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + group})
	if err != nil {
		t.Fatal(err)
	}
	said := false
	for _, e := range events.Items {
		said = said || e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "podManagementPolicy OrderedReady") && strings.Contains(e.Message, "Parallel")
	}
	if !said {
		t.Errorf("no warning event on PodGroup %s saying why it is not a gang; events: %+v", group, events.Items)
	}
}
