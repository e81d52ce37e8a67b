package integrations

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

var leaderWorkerSets = lwsv1.GroupVersion.WithResource("leaderworkersets")

// inference is a LeaderWorkerSet of replicas groups of size GPU pods.
func inference(ns, name string, replicas, size int32) *lwsv1.LeaderWorkerSet {
	p := gpuPod()
	return &lwsv1.LeaderWorkerSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: lwsv1.GroupVersion.String(), Kind: "LeaderWorkerSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: lwsv1.LeaderWorkerSetSpec{
			Replicas:      ptr.To(replicas),
			StartupPolicy: lwsv1.LeaderCreatedStartupPolicy,
			LeaderWorkerTemplate: lwsv1.LeaderWorkerTemplate{
				Size:           ptr.To(size),
				WorkerTemplate: corev1.PodTemplateSpec{ObjectMeta: p.ObjectMeta, Spec: p.Spec},
			},
		},
	}
}

func createLWS(t *testing.T, ctx context.Context, h *harness.Harness, l *lwsv1.LeaderWorkerSet) {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(l)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Dynamic.Resource(leaderWorkerSets).Namespace(l.Namespace).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// lwsGroups counts a LeaderWorkerSet's bound pods per group index, and
// whether every pod is in its group's gang (<name>-<group index>).
func lwsGroups(ctx context.Context, h *harness.Harness, ns, name string) (bound map[string]int, pods int, grouped bool, err error) {
	list, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: lwsv1.SetNameLabelKey + "=" + name})
	if err != nil {
		return nil, 0, false, err
	}
	bound, grouped = map[string]int{}, len(list.Items) > 0
	for _, p := range list.Items {
		idx := p.Labels[lwsv1.GroupIndexLabelKey]
		if p.Spec.NodeName != "" {
			bound[idx]++
		}
		if p.Labels[lockv1.PodGroupLabel] != name+"-"+idx {
			grouped = false
		}
	}
	return bound, len(list.Items), grouped, nil
}

// Each replica of a LeaderWorkerSet — a leader and its workers — is a gang
// of its own: two replicas of 3 GPU pods both run (6 of 8 GPUs); a second
// LeaderWorkerSet whose one group of 3 does not fit holds nothing and
// explains why; deleting the first lets it run.
func TestLeaderWorkerSetGroupsAreGangs(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	h.OneGPUTemplate(ctx, t, ns)
	createLWS(t, ctx, h, inference(ns, "serve-a", 2, 3))
	harness.Eventually(t, ctx, "both groups of serve-a bound whole (3+3), each pod in its group's gang", func(ctx context.Context) (bool, string, error) {
		bound, pods, grouped, err := lwsGroups(ctx, h, ns, "serve-a")
		return pods == 6 && bound["0"] == 3 && bound["1"] == 3 && grouped, fmt.Sprintf("%d pods, bound per group %v, grouped %v", pods, bound, grouped), err
	})
	for _, g := range []string{"serve-a-0", "serve-a-1"} {
		pg, err := h.PodGroup(ctx, ns, g)
		if err != nil {
			t.Fatal(err)
		}
		if gang := pg.Spec.SchedulingPolicy.Gang; gang == nil || gang.MinCount != 3 || len(pg.OwnerReferences) != 1 || pg.OwnerReferences[0].Kind != "LeaderWorkerSet" {
			t.Errorf("PodGroup %s: want a gang of minCount 3 owned by the LeaderWorkerSet, got %+v owners %+v", g, pg.Spec, pg.OwnerReferences)
		}
	}
	createLWS(t, ctx, h, inference(ns, "serve-b", 1, 3))
	harness.Eventually(t, ctx, "serve-b's group waiting whole with a condition saying why", func(ctx context.Context) (bool, string, error) {
		bound, pods, _, err := lwsGroups(ctx, h, ns, "serve-b")
		if err != nil {
			return false, "", err
		}
		c, err := h.ScheduledCondition(ctx, ns, "serve-b-0")
		if apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("%d pods, no PodGroup yet", pods), nil
		}
		if err != nil || c == nil {
			return false, fmt.Sprintf("%d pods, no condition", pods), err
		}
		return pods == 3 && bound["0"] == 0 && c.Reason == lockv1.PodGroupReasonUnschedulable && strings.Contains(c.Message, "no free device of class gpu.example.com"),
			fmt.Sprintf("%d pods, bound %v; %s: %s", pods, bound, c.Reason, c.Message), nil
	})
	r := h.Explain(t, ns, "lws", "serve-b")
	if r.Unit != "PodGroup "+ns+"/serve-b-0" || !r.Gang || r.MinCount != 3 || r.Bound != 0 {
		t.Errorf("explain lws serve-b: unit %q gang %v minCount %d bound %d answer %q", r.Unit, r.Gang, r.MinCount, r.Bound, r.Answer)
	}
	if err := h.Dynamic.Resource(leaderWorkerSets).Namespace(ns).Delete(ctx, "serve-a", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, ctx, "serve-b's group bound whole once serve-a is gone", func(ctx context.Context) (bool, string, error) {
		bound, _, grouped, err := lwsGroups(ctx, h, ns, "serve-b")
		return bound["0"] == 3 && grouped, fmt.Sprintf("bound %v, grouped %v", bound, grouped), err
	})
	h.NoLifecycleRestart(t, ctx, ns, "serve-b-0")
}

// A LeaderWorkerSet scaled down loses the groups above its new replicas:
// their PodGroups are deleted once their pods are gone, the group that stays
// keeps its pods (nothing restarts), and scaling up again makes the group
// anew and places it whole.
func TestLeaderWorkerSetScaleDownRemovesItsGroups(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	h.OneGPUTemplate(ctx, t, ns)
	createLWS(t, ctx, h, inference(ns, "serve", 2, 2))
	harness.Eventually(t, ctx, "both groups bound whole (2+2)", func(ctx context.Context) (bool, string, error) {
		bound, pods, grouped, err := lwsGroups(ctx, h, ns, "serve")
		return pods == 4 && bound["0"] == 2 && bound["1"] == 2 && grouped, fmt.Sprintf("%d pods, bound per group %v, grouped %v", pods, bound, grouped), err
	})
	kept, _, err := h.GroupPods(ctx, ns, "serve-0")
	if err != nil {
		t.Fatal(err)
	}
	scale := func(replicas int64) {
		t.Helper()
		patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
		if _, err := h.Dynamic.Resource(leaderWorkerSets).Namespace(ns).Patch(ctx, "serve", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	scale(1)
	harness.Eventually(t, ctx, "PodGroup serve-1 deleted once its pods are gone; serve-0 stays bound", func(ctx context.Context) (bool, string, error) {
		_, err := h.PodGroup(ctx, ns, "serve-1")
		gone := apierrors.IsNotFound(err)
		if err != nil && !gone {
			return false, "", err
		}
		bound, pods, _, err := lwsGroups(ctx, h, ns, "serve")
		return gone && pods == 2 && bound["0"] == 2, fmt.Sprintf("serve-1 deleted %v; %d pods, bound %v", gone, pods, bound), err
	})
	if _, err := h.PodGroup(ctx, ns, "serve-0"); err != nil {
		t.Fatalf("the group that stays lost its PodGroup: %v", err)
	}
	now, _, err := h.GroupPods(ctx, ns, "serve-0")
	if err != nil {
		t.Fatal(err)
	}
	if len(now) != len(kept) {
		t.Fatalf("serve-0 has %d pods, had %d", len(now), len(kept))
	}
	for i := range kept {
		if now[i].UID != kept[i].UID {
			t.Errorf("serve-0's pod %s was replaced by a scale-down of another group", kept[i].Name)
		}
	}
	scale(2)
	harness.Eventually(t, ctx, "serve-1 made again and bound whole after scaling up", func(ctx context.Context) (bool, string, error) {
		bound, pods, grouped, err := lwsGroups(ctx, h, ns, "serve")
		return pods == 4 && bound["0"] == 2 && bound["1"] == 2 && grouped, fmt.Sprintf("%d pods, bound per group %v, grouped %v", pods, bound, grouped), err
	})
	h.NoLifecycleRestart(t, ctx, ns, "serve-0")
}

// A gang restart costs a LeaderWorkerSet nothing (issue 38: it has no
// budget): one GPU of a group reported Unhealthy restarts that group whole,
// the LeaderWorkerSet controller recreates its leader and workers, and the
// group runs again whole as its next incarnation; the other group is never
// touched.
func TestLeaderWorkerSetGangRestartCostsNothing(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	h.OneGPUTemplate(ctx, t, ns)
	createLWS(t, ctx, h, inference(ns, "serve", 2, 3))
	other := h.WaitRunning(t, ctx, ns, "serve-1", 3)
	t.Logf("the group ran again whole %s after the restart", h.RestartOnUnhealthyDevice(t, ctx, ns, "serve-0", 3).Round(100*time.Millisecond))
	now, err := h.RunningPods(ctx, ns, "serve-1")
	if err != nil {
		t.Fatal(err)
	}
	for uid := range other {
		if _, ok := now[uid]; !ok {
			t.Errorf("the other group's pod %s was taken down", uid)
		}
	}
	h.NoLifecycleRestart(t, ctx, ns, "serve-1")
}
