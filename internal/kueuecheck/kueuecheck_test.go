package kueuecheck

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

func workload(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

const reserved = `
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: job-train, namespace: ml, uid: wl-uid}
spec:
  podSets:
  - name: main
    count: 2
    template:
      metadata: {labels: {scheduling.lockstep.dev/pod-group: train}}
      spec:
        schedulerName: lockstep
        containers: [{name: rank, image: x}]
  - name: launcher
    count: 1
    template:
      spec: {containers: [{name: l, image: x}]}
status:
  conditions:
  - {type: QuotaReserved, status: "True", reason: QuotaReserved, message: "", lastTransitionTime: "2026-01-01T00:00:00Z"}
  admissionChecks:
  - {name: placement, state: Pending, lastTransitionTime: "2026-01-01T00:00:00Z", message: ""}
  - {name: provisioning, state: Pending, lastTransitionTime: "2026-01-01T00:00:00Z", message: ""}
`

func TestPendingChecks(t *testing.T) {
	ours := func(n string) bool { return n == "placement" }
	if got := PendingChecks(workload(t, reserved), ours); !cmp.Equal(got, []string{"placement"}) {
		t.Errorf("pending %v, want [placement]", got)
	}
	for name, edit := range map[string]func(*unstructured.Unstructured){
		"no quota yet": func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, nil, "status", "conditions")
		},
		"answered": func(u *unstructured.Unstructured) {
			checks, _, _ := unstructured.NestedSlice(u.Object, "status", "admissionChecks")
			checks[0].(map[string]any)["state"] = StateReady
			_ = unstructured.SetNestedSlice(u.Object, checks, "status", "admissionChecks")
		},
		"evicted": func(u *unstructured.Unstructured) {
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			conds = append(conds, map[string]any{"type": "Evicted", "status": "True", "reason": "AdmissionCheck", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"})
			_ = unstructured.SetNestedSlice(u.Object, conds, "status", "conditions")
		},
	} {
		t.Run(name, func(t *testing.T) {
			wl := workload(t, reserved)
			edit(wl)
			if got := PendingChecks(wl, ours); len(got) != 0 {
				t.Errorf("pending %v, want none", got)
			}
		})
	}
}

func TestPodSets(t *testing.T) {
	owner := &metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "job-uid", Controller: ptr.To(true)}
	sets, err := PodSets(workload(t, reserved), owner)
	if err != nil {
		t.Fatal(err)
	}
	type pod struct{ Name, UID, Group, Scheduler, Owner string }
	var got []pod
	for _, ps := range sets {
		for _, p := range ps.Pods {
			got = append(got, pod{p.Name, string(p.UID), p.Labels["scheduling.lockstep.dev/pod-group"], p.Spec.SchedulerName, string(p.OwnerReferences[0].UID)})
		}
	}
	want := []pod{
		{"job-train-main-0", "kueue-check-wl-uid-main-0", "train", "lockstep", "job-uid"},
		{"job-train-main-1", "kueue-check-wl-uid-main-1", "train", "lockstep", "job-uid"},
		{"job-train-launcher-0", "kueue-check-wl-uid-launcher-0", "", "", "job-uid"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pods (-want,+got):\n%s", diff)
	}
}

// A pod set is pinned to the values all its nodes share, key by key; a
// pod set spread over two values of a key is not pinned on that key.
func TestPins(t *testing.T) {
	sets := []PodSet{{Name: "a"}, {Name: "b"}}
	nodeOf := map[types.UID]string{}
	for i, n := range []string{"n1", "n2"} {
		p := podNamed("a", i)
		sets[0].Pods = append(sets[0].Pods, p)
		nodeOf[p.UID] = n
	}
	for i, n := range []string{"n2", "n3"} {
		p := podNamed("b", i)
		sets[1].Pods = append(sets[1].Pods, p)
		nodeOf[p.UID] = n
	}
	labels := map[string]map[string]string{
		"n1": {"zone": "z1", "rack": "r1"},
		"n2": {"zone": "z1", "rack": "r1"},
		"n3": {"zone": "z1", "rack": "r2"},
	}
	got := Pins(sets, nodeOf, func(n string) map[string]string { return labels[n] }, []string{"zone", "rack", "missing"})
	want := []PodSetUpdate{
		{Name: "a", NodeSelector: map[string]string{"zone": "z1", "rack": "r1"}},
		{Name: "b", NodeSelector: map[string]string{"zone": "z1"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pins (-want,+got):\n%s", diff)
	}
}

func TestSetChecksAndActivate(t *testing.T) {
	wl := workload(t, reserved)
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	out, err := SetChecks(wl, []string{"placement"}, StateReady, "fits now in rack=r1", []PodSetUpdate{{Name: "main", NodeSelector: map[string]string{"rack": "r1"}}}, now)
	if err != nil {
		t.Fatal(err)
	}
	checks, _, _ := unstructured.NestedSlice(out.Object, "status", "admissionChecks")
	want := []any{
		map[string]any{"name": "placement", "state": "Ready", "message": "fits now in rack=r1", "lastTransitionTime": "2026-12-04T00:00:00Z",
			"podSetUpdates": []any{map[string]any{"name": "main", "nodeSelector": map[string]any{"rack": "r1"}}}},
		map[string]any{"name": "provisioning", "state": "Pending", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
	}
	if diff := cmp.Diff(want, checks); diff != "" {
		t.Errorf("checks (-want,+got):\n%s", diff)
	}
	if s, _, _ := unstructured.NestedString(wl.Object, "status", "admissionChecks", "0", "state"); s == StateReady {
		t.Error("SetChecks changed its input")
	}
	// Retry carries no delay (Kueue would hold the quota through it) and
	// keeps Kueue's retry count; Ready drops a delay set by another.
	in := wl.DeepCopy()
	checks0, _, _ := unstructured.NestedSlice(in.Object, "status", "admissionChecks")
	checks0[0].(map[string]any)["retryCount"] = int64(3)
	checks0[0].(map[string]any)["requeueAfterSeconds"] = int64(60)
	_ = unstructured.SetNestedSlice(in.Object, checks0, "status", "admissionChecks")
	for _, state := range []string{StateRetry, StateReady} {
		set, err := SetChecks(in, []string{"placement"}, state, "no rack has 8 free GPUs", nil, now)
		if err != nil {
			t.Fatal(err)
		}
		c, _, _ := unstructured.NestedSlice(set.Object, "status", "admissionChecks")
		m := c[0].(map[string]any)
		if _, has := m["requeueAfterSeconds"]; has || m["retryCount"] != int64(3) || m["state"] != state {
			t.Errorf("%s: check %v, want no requeueAfterSeconds and retryCount 3 kept", state, m)
		}
	}
	ac := workload(t, "apiVersion: kueue.x-k8s.io/v1beta2\nkind: AdmissionCheck\nmetadata: {name: placement}\nspec: {controllerName: scheduling.lockstep.dev/placement}\n")
	if !Ours(ac) {
		t.Fatal("not ours")
	}
	active, err := Activate(ac, now)
	if err != nil || active == nil || !conditionTrue(active, "Active") {
		t.Fatalf("Activate: %v %v", active, err)
	}
	if again, _ := Activate(active, now); again != nil {
		t.Error("an active check activated again")
	}
}

func podNamed(set string, i int) *corev1.Pod { return newPod(set, i) }

func newPod(set string, i int) *corev1.Pod {
	p := &corev1.Pod{}
	p.Name = set + "-" + string(rune('0'+i))
	p.UID = types.UID(p.Name)
	return p
}

func conditionTrue(u *unstructured.Unstructured, t string) bool {
	for _, c := range conditions(u) {
		if c.Type == t {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

func TestApplyFlavors(t *testing.T) {
	wl := workload(t, reserved)
	if err := unstructured.SetNestedSlice(wl.Object, []any{
		map[string]any{"name": "main", "count": int64(2), "flavors": map[string]any{"cpu": "on-demand", "example.com/gpu": "h100"}},
		map[string]any{"name": "launcher", "count": int64(1), "flavors": map[string]any{"cpu": "on-demand"}},
	}, "status", "admission", "podSetAssignments"); err != nil {
		t.Fatal(err)
	}
	flavors := map[string]*unstructured.Unstructured{
		"on-demand": workload(t, `{apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: on-demand}, spec: {nodeLabels: {capacity: on-demand}}}`),
		"h100": workload(t, `{apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: h100}, spec: {nodeLabels: {gpu: h100},
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]}}`),
	}
	get := func(n string) (*unstructured.Unstructured, error) {
		if f, ok := flavors[n]; ok {
			return f, nil
		}
		return nil, fmt.Errorf("not found")
	}
	sets, err := PodSets(wl, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ApplyFlavors(sets, wl, get); err != nil {
		t.Fatal(err)
	}
	wantTol := []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	for _, p := range sets[0].Pods {
		if want := map[string]string{"capacity": "on-demand", "gpu": "h100"}; !cmp.Equal(p.Spec.NodeSelector, want) {
			t.Errorf("main pod %s: node selector %v, want %v", p.Name, p.Spec.NodeSelector, want)
		}
		if !cmp.Equal(p.Spec.Tolerations, wantTol) {
			t.Errorf("main pod %s: tolerations %v, want %v", p.Name, p.Spec.Tolerations, wantTol)
		}
	}
	if l := sets[1].Pods[0]; !cmp.Equal(l.Spec.NodeSelector, map[string]string{"capacity": "on-demand"}) || len(l.Spec.Tolerations) != 0 {
		t.Errorf("launcher: node selector %v, tolerations %v; want only capacity=on-demand", l.Spec.NodeSelector, l.Spec.Tolerations)
	}
	// A flavor that does not exist is an error naming it.
	delete(flavors, "h100")
	sets, _ = PodSets(wl, nil)
	if err := ApplyFlavors(sets, wl, get); err == nil || !strings.Contains(err.Error(), "ResourceFlavor h100") {
		t.Errorf("missing flavor: error %v, want one naming ResourceFlavor h100", err)
	}
}

func TestLastRetried(t *testing.T) {
	wl := workload(t, reserved)
	if _, ok := LastRetried(wl, "placement"); ok {
		t.Error("a check never retried reports a retry")
	}
	checks, _, _ := unstructured.NestedSlice(wl.Object, "status", "admissionChecks")
	checks[0].(map[string]any)["retryCount"] = int64(2)
	checks[0].(map[string]any)["lastTransitionTime"] = "2026-12-04T10:00:00Z"
	_ = unstructured.SetNestedSlice(wl.Object, checks, "status", "admissionChecks")
	at, ok := LastRetried(wl, "placement")
	if want := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC); !ok || !at.Equal(want) {
		t.Errorf("LastRetried = %v %v, want %v", at, ok, want)
	}
	if _, ok := LastRetried(wl, "provisioning"); ok {
		t.Error("another check's retries are counted")
	}
}

func TestClusterQueueAndWaiting(t *testing.T) {
	lqs := map[string]*unstructured.Unstructured{
		"ml/team": workload(t, `{apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {name: team, namespace: ml}, spec: {clusterQueue: gpus}}`),
	}
	lq := func(ns, name string) (*unstructured.Unstructured, error) {
		if q, ok := lqs[ns+"/"+name]; ok {
			return q, nil
		}
		return nil, fmt.Errorf("not found")
	}
	pending := workload(t, `{apiVersion: kueue.x-k8s.io/v1beta2, kind: Workload, metadata: {name: a, namespace: ml}, spec: {queueName: team}}`)
	if cq := ClusterQueue(pending, lq); cq != "gpus" || !Waiting(pending) {
		t.Errorf("pending workload: ClusterQueue %q, waiting %v; want gpus, true", cq, Waiting(pending))
	}
	reserved := workload(t, reserved)
	_ = unstructured.SetNestedField(reserved.Object, "other", "status", "admission", "clusterQueue")
	if cq := ClusterQueue(reserved, lq); cq != "other" || Waiting(reserved) {
		t.Errorf("reserved workload: ClusterQueue %q, waiting %v; want other (its admission), false", cq, Waiting(reserved))
	}
	inactive := pending.DeepCopy()
	_ = unstructured.SetNestedField(inactive.Object, false, "spec", "active")
	if Waiting(inactive) {
		t.Error("an inactive workload waits for quota")
	}
	unknown := workload(t, `{apiVersion: kueue.x-k8s.io/v1beta2, kind: Workload, metadata: {name: b, namespace: ml}, spec: {queueName: gone}}`)
	if cq := ClusterQueue(unknown, lq); cq != "" {
		t.Errorf("a workload of a missing LocalQueue: ClusterQueue %q, want empty", cq)
	}
}
