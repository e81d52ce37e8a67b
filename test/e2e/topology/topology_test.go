package topology

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// group is a gang PodGroup with required keys and preferred ones.
func group(ns, name string, minCount int32, required []string, preferred ...string) *lockv1.PodGroup {
	pg := builders.GangPodGroup(ns, name, minCount)
	if len(required) > 0 {
		pg.Spec.SchedulingConstraints = &lockv1.PodGroupSchedulingConstraints{}
		for _, k := range required {
			pg.Spec.SchedulingConstraints.Topology = append(pg.Spec.SchedulingConstraints.Topology, lockv1.TopologyConstraint{Key: k})
		}
	}
	if len(preferred) > 0 {
		pg.Annotations = map[string]string{lockv1.PreferredTopologyAnnotation: strings.Join(preferred, ",")}
	}
	return pg
}

// members creates pods first..first+n-1 of group, one GPU each.
func members(t *testing.T, ctx context.Context, h *harness.Harness, ns, group string, first, n int, class string) {
	t.Helper()
	for i := first; i < first+n; i++ {
		p := builders.MakePod().Namespace(ns).Name(fmt.Sprintf("%s-%d", group, i)).Member(group).ClaimTemplate("gpu", "one-gpu").Obj()
		p.Spec.PriorityClassName = class
		p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
		if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// labelsOf maps each bound pod of group to its node's value of key.
func labelsOf(t *testing.T, ctx context.Context, h *harness.Harness, ns, group, key string) map[string]string {
	t.Helper()
	pods, _, err := h.GroupPods(ctx, ns, group)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			continue
		}
		n, err := h.Client.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out[p.Name] = n.Labels[key]
	}
	return out
}

// one checks every value of m is the same and returns it.
func one(t *testing.T, what string, m map[string]string) string {
	t.Helper()
	v := ""
	for pod, val := range m {
		if v != "" && val != v {
			t.Errorf("%s: pods in several domains: %v (%s)", what, m, pod)
		}
		v = val
	}
	return v
}

// A gang that fits one rack lands in one rack; one that fits no rack but
// one zone lands in one zone (falling back level by level, never wider
// than its required zone).
func TestPreferredRackFallsBackToTheZone(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	h.OneGPUTemplate(ctx, t, ns)
	h.CreatePodGroup(ctx, t, group(ns, "small", 4, []string{zone}, rack))
	members(t, ctx, h, ns, "small", 0, 4, "")
	waitBound(t, ctx, h, ns, "small", 4)
	one(t, "small in a rack", labelsOf(t, ctx, h, ns, "small", rack))

	h.CreatePodGroup(ctx, t, group(ns, "wide", 12, []string{zone}, rack))
	members(t, ctx, h, ns, "wide", 0, 12, "")
	waitBound(t, ctx, h, ns, "wide", 12)
	one(t, "wide in a zone", labelsOf(t, ctx, h, ns, "wide", zone))
	if racks := labelsOf(t, ctx, h, ns, "wide", rack); len(distinct(racks)) < 2 {
		t.Errorf("12 GPUs in one rack of 8? %v", racks)
	}
}

// Members added after a gang is admitted go where it runs: into its rack
// while the rack has room, then its zone — never the other zone, though it
// has more room; when the zone is full they wait, naming the zone.
func TestLaterMembersStayInTheGangsDomain(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	h.OneGPUTemplate(ctx, t, ns)
	h.CreatePodGroup(ctx, t, group(ns, "grow", 2, []string{zone}, rack))
	members(t, ctx, h, ns, "grow", 0, 2, "")
	waitBound(t, ctx, h, ns, "grow", 2)
	z := one(t, "first two", labelsOf(t, ctx, h, ns, "grow", zone))
	r := one(t, "first two", labelsOf(t, ctx, h, ns, "grow", rack))

	members(t, ctx, h, ns, "grow", 2, 2, "")
	waitBound(t, ctx, h, ns, "grow", 4)
	if got := one(t, "four", labelsOf(t, ctx, h, ns, "grow", rack)); got != r {
		t.Errorf("later members left rack %s for %s", r, got)
	}
	members(t, ctx, h, ns, "grow", 4, 14, "")
	waitBound(t, ctx, h, ns, "grow", 16) // the zone's 16 GPUs, none of the other zone's
	if got := one(t, "eight", labelsOf(t, ctx, h, ns, "grow", zone)); got != z {
		t.Errorf("later members left zone %s for %s", z, got)
	}
	harness.Eventually(t, ctx, "the members beyond the zone wait, naming it", func(ctx context.Context) (bool, string, error) {
		pods, _, err := h.GroupPods(ctx, ns, "grow")
		if err != nil {
			return false, "", err
		}
		told := 0
		for _, p := range pods {
			for _, c := range p.Status.Conditions {
				if p.Spec.NodeName == "" && c.Type == corev1.PodScheduled && strings.Contains(c.Message, "outside "+zone+"="+z+", where the gang's running members are") {
					told++
				}
			}
		}
		return told == 2, fmt.Sprintf("%d of 2 pending members name the zone", told), nil
	})
}

// A gang asking that its devices share one clique (a device attribute, not
// a node label) gets devices of one clique: the even or the odd nodes.
func TestDeviceAttributeDomain(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	h.OneGPUTemplate(ctx, t, ns)
	pg := group(ns, "clique", 6, nil)
	pg.Annotations = map[string]string{lockv1.DeviceTopologyAnnotation: "gpu.example.com/clique"}
	h.CreatePodGroup(ctx, t, pg)
	members(t, ctx, h, ns, "clique", 0, 6, "")
	waitBound(t, ctx, h, ns, "clique", 6)
	pods, _, err := h.GroupPods(ctx, ns, "clique")
	if err != nil {
		t.Fatal(err)
	}
	parity := map[string]string{}
	for _, p := range pods {
		n := p.Spec.NodeName
		parity[p.Name] = fmt.Sprint((n[len(n)-1] - '0') % 2)
	}
	one(t, "clique", parity)
}

// A higher-priority gang that needs a whole rack preempts inside one rack
// — the cheapest — and never evicts pods in two racks.
func TestPreemptionInsideOneDomain(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	h.OneGPUTemplate(ctx, t, ns)
	for _, pc := range []*schedulingv1.PriorityClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "topology-low"}, Value: 10},
		{ObjectMeta: metav1.ObjectMeta{Name: "topology-urgent"}, Value: 1000},
	} {
		if _, err := h.Client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	// Fill every GPU with lone low-priority pods, 32 in all.
	for i := 0; i < 32; i++ {
		p := builders.MakePod().Namespace(ns).Name(fmt.Sprintf("low-%d", i)).Scheduler(lockv1.SchedulerName).ClaimTemplate("gpu", "one-gpu").Obj()
		p.Spec.PriorityClassName = "topology-low"
		p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
		if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	harness.Eventually(t, ctx, "32 low pods running", func(ctx context.Context) (bool, string, error) {
		pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		n := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				n++
			}
		}
		return n == 32, fmt.Sprintf("%d bound", n), nil
	})
	before := lowNodes(t, ctx, h, ns)
	h.CreatePodGroup(ctx, t, group(ns, "urgent", 8, []string{rack}))
	members(t, ctx, h, ns, "urgent", 0, 8, "topology-urgent")
	waitBound(t, ctx, h, ns, "urgent", 8)
	r := one(t, "urgent", labelsOf(t, ctx, h, ns, "urgent", rack))
	after := lowNodes(t, ctx, h, ns)
	evictedRacks := map[string]bool{}
	for pod, node := range before {
		if _, ok := after[pod]; !ok {
			n, err := h.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			evictedRacks[n.Labels[rack]] = true
		}
	}
	if len(evictedRacks) != 1 || !evictedRacks[r] {
		t.Errorf("victims in racks %v; want only the preemptor's rack %s", evictedRacks, r)
	}
	if n := len(before) - len(after); n != 8 {
		t.Errorf("%d pods evicted, want the 8 of one rack", n)
	}
}

// lowNodes maps each bound low pod to its node.
func lowNodes(t *testing.T, ctx context.Context, h *harness.Harness, ns string) map[string]string {
	t.Helper()
	pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, "low-") && p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
			out[p.Name] = p.Spec.NodeName
		}
	}
	return out
}

func distinct(m map[string]string) map[string]bool {
	out := map[string]bool{}
	for _, v := range m {
		out[v] = true
	}
	return out
}

// A Job asks for topology with annotations — no PodGroup written by hand:
// its gang's PodGroup gets them, and its ranks land in one rack of one zone.
func TestJobTopologyAnnotations(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	h.OneGPUTemplate(ctx, t, ns)
	job := builders.IndexedJob(ns, "train", 4, builders.MakePod().Scheduler(lockv1.SchedulerName).ClaimTemplate("gpu", "one-gpu").Obj())
	job.Annotations = map[string]string{lockv1.RequiredTopologyAnnotation: zone, lockv1.PreferredTopologyAnnotation: rack}
	if _, err := h.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitBound(t, ctx, h, ns, "train", 4)
	one(t, "train's ranks in a rack", labelsOf(t, ctx, h, ns, "train", rack))
	pg, err := h.PodGroup(ctx, ns, "train")
	if err != nil {
		t.Fatal(err)
	}
	if c := pg.Spec.SchedulingConstraints; c == nil || len(c.Topology) != 1 || c.Topology[0].Key != zone || pg.Annotations[lockv1.PreferredTopologyAnnotation] != rack {
		t.Errorf("the Job's PodGroup has constraints %+v and annotations %v; want required %s, preferred %s", c, pg.Annotations, zone, rack)
	}
}

// An elastic gang (8 ranks, minCount 4) with a required rack takes the rack
// that holds every rank, not the first rack that admits its minCount: with
// 4 GPUs of rack-0 held, rack-0 (first by name) admits 4 ranks and rack-1
// holds all 8 — all 8 bind in rack-1, none wait. (The ranks exist before
// their PodGroup, so the scheduler sees all 8 at once.)
func TestElasticGangTakesTheRackThatHoldsItAll(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	h.OneGPUTemplate(ctx, t, ns)
	if _, err := h.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, builders.ClaimTemplate(ns, "four-gpus", "gpu.example.com", 4), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hog := builders.MakePod().Namespace(ns).Name("hog").Scheduler(lockv1.SchedulerName).ClaimTemplate("gpu", "four-gpus").Obj()
	hog.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"gpu-0"}}}}},
	}}}
	if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, hog, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, ctx, "the hog bound on gpu-0", func(ctx context.Context) (bool, string, error) {
		p, err := h.Client.CoreV1().Pods(ns).Get(ctx, "hog", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return p.Spec.NodeName == "gpu-0", "node " + p.Spec.NodeName, nil
	})
	members(t, ctx, h, ns, "elastic", 0, 8, "")
	h.CreatePodGroup(ctx, t, group(ns, "elastic", 4, []string{rack}))
	waitBound(t, ctx, h, ns, "elastic", 8)
	if got := one(t, "elastic", labelsOf(t, ctx, h, ns, "elastic", rack)); got != "rack-1" {
		t.Errorf("the gang landed in %s, want rack-1, the rack that holds all 8", got)
	}
}
