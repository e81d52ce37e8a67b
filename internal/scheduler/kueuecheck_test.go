package scheduler

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/cycle"
	"github.com/lockstep-dev/lockstep/internal/kueuecheck"
	"github.com/lockstep-dev/lockstep/internal/queue"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// checkedWorkload is the Kueue Workload of a Job "train" of 3 one-GPU
// ranks required in one rack (its pods join PodGroup train, as Lockstep's
// webhook labels the Job's template), its quota reserved and Lockstep's
// check Pending; with the AdmissionCheck naming Lockstep's controller.
const checkedWorkload = `
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata:
  name: job-train
  namespace: ml
  uid: wl-train
  ownerReferences: [{apiVersion: batch/v1, kind: Job, name: train, uid: job-train, controller: true}]
spec:
  queueName: team
  podSets:
  - name: main
    count: 3
    template:
      metadata: {labels: {scheduling.lockstep.dev/pod-group: train}}
      spec:
        schedulerName: lockstep
        resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
        containers: [{name: rank, image: train, resources: {claims: [{name: gpu}]}}]
status:
  conditions:
  - {type: QuotaReserved, status: "True", reason: QuotaReserved, message: "", lastTransitionTime: "2026-12-03T00:00:00Z"}
  admissionChecks:
  - {name: lockstep-placement, state: Pending, lastTransitionTime: "2026-12-03T00:00:00Z", message: ""}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: lockstep-placement}
spec: {controllerName: scheduling.lockstep.dev/placement}
`

func kueueObjects(t *testing.T, docs string) []runtime.Object {
	t.Helper()
	var out []runtime.Object
	for _, doc := range strings.Split(docs, "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

// busy are running one-GPU pods of priority 1000 (nothing preempts them):
// 2 GPUs of rack-0's node, 2 of rack-1's, 3 of rack-2's; rack-3's 4 are
// free, the only rack with room for 3 ranks.
func busy() []runtime.Object {
	var out []runtime.Object
	for node, n := range map[string]int{"gpu-0": 2, "gpu-1": 2, "gpu-2": 3} {
		out = append(out, running(gpuPods("other", "", "busy-"+node, n, 1000), node, 0)...)
	}
	return out
}

// rack3Broken is a DeviceTaintRule taking every GPU of rack-3's node.
func rack3Broken() *resourcev1.DeviceTaintRule {
	return &resourcev1.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: "rack-3-broken"},
		Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: ptr.To("gpu.example.com"), Pool: ptr.To("gpu-3")},
			Taint:          resourcev1.DeviceTaint{Key: "example.com/broken", Value: "ecc", Effect: resourcev1.DeviceTaintEffectNoSchedule},
		},
	}
}

// checkState is the workload's Lockstep check as the API server has it.
func (f *fixture) checkState() (state, message string, pin map[string]string) {
	f.t.Helper()
	wl, err := f.dyn.Resource(kueuecheck.WorkloadResource).Namespace("ml").Get(f.ctx, "job-train", metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	checks, _, _ := unstructured.NestedSlice(wl.Object, "status", "admissionChecks")
	m := checks[0].(map[string]any)
	state, _ = m["state"].(string)
	message, _ = m["message"].(string)
	if ups, _, _ := unstructured.NestedSlice(m, "podSetUpdates"); len(ups) > 0 {
		pin, _, _ = unstructured.NestedStringMap(ups[0].(map[string]any), "nodeSelector")
	}
	return state, message, pin
}

// admit creates the Job's pods as Kueue lets the Job controller create
// them — from the template, with the check's node selector — and runs
// the scheduler's cycle for their group; it returns the nodes they were
// bound to.
func (f *fixture) admit(pin map[string]string) []string {
	f.t.Helper()
	objs := gpuPods("ml", "train", "train", 3, 0)
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.Pod:
			o.Spec.NodeSelector = pin
			_, err = f.client.CoreV1().Pods("ml").Create(f.ctx, o, metav1.CreateOptions{})
		case *resourcev1.ResourceClaim:
			_, err = f.client.ResourceV1().ResourceClaims("ml").Create(f.ctx, o, metav1.CreateOptions{})
		}
		if err != nil {
			f.t.Fatal(err)
		}
	}
	f.waitFor("the Job's pods in the cache", func() bool {
		pods, _ := f.s.listers.pods.Pods("ml").List(labels.SelectorFromSet(labels.Set{lockv1.PodGroupLabel: "train"}))
		for i := range 3 {
			if _, err := f.s.listers.claims.ResourceClaims("ml").Get(fmt.Sprintf("train-%d-gpu", i)); err != nil {
				return false
			}
		}
		return len(pods) == 3
	})
	f.run(queue.GroupKey("ml", "train"))
	var nodes []string
	for i := range 3 {
		if n := f.pod("ml", fmt.Sprintf("train-%d", i)).Spec.NodeName; n != "" {
			nodes = append(nodes, n)
		}
	}
	return nodes
}

// The placement check agrees with the scheduler: it passes a gang exactly
// when the scheduler then binds the gang's pods whole (in the domain the
// check pinned), and retries one the scheduler would leave pending — with
// devices a DeviceTaintRule takes, with room a higher-priority unit's
// nomination holds, and against a competitor that arrives between the
// check and the pods (the check's own hold keeps the room for them).
func TestPlacementCheckAgreesWithTheScheduler(t *testing.T) {
	taint := rack3Broken()
	// urgent: 2 pending pods of priority 2000 nominated to rack-3's node
	// (their preemption's victims gone): they hold 2 of its GPUs.
	urgent := gpuPods("hi", "", "urgent", 2, 2000)
	for _, o := range urgent {
		if p, ok := o.(*corev1.Pod); ok {
			p.Status.NominatedNodeName = "gpu-3"
		}
	}
	for _, tc := range []struct {
		name string
		objs []runtime.Object
		// competitor: an equal-priority 3-rank rack gang whose pods arrive
		// between the check and the Job's pods.
		competitor bool
		wantState  string
		wantMsg    string
	}{
		{name: "fits in the one rack with room: Ready, pinned there, bound there", wantState: kueuecheck.StateReady, wantMsg: "train fits now: 3 pods placeable in example.com/rack=rack-3"},
		{name: "a DeviceTaintRule takes that rack's GPUs: Retry, and the scheduler leaves it pending", objs: []runtime.Object{taint},
			wantState: kueuecheck.StateRetry, wantMsg: "minCount 3 not satisfiable"},
		{name: "a higher-priority nomination holds that rack: Retry, and the scheduler leaves it pending", objs: urgent,
			wantState: kueuecheck.StateRetry, wantMsg: "minCount 3 not satisfiable"},
		{name: "a competitor arrives after the check: the hold keeps the rack for the Job", competitor: true,
			wantState: kueuecheck.StateReady, wantMsg: "the room is held for its pods"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := objects(busy(), kueueObjects(t, checkedWorkload), tc.objs, []runtime.Object{
				rackGang("train"), builders.ClaimTemplate("ml", "one-gpu", "gpu.example.com", 1),
			})
			if tc.competitor {
				objs = append(objs, rackGang("rival"))
			}
			f := newFixtureAPI(t, zonedRacks, fixtureAPI{kueue: true, check: true}, objs...)
			if pods, err := f.s.listers.pods.List(labels.Everything()); err == nil {
				cycle.RestoreNominations(f.s.state.Cache, pods, f.s.unitOf, f.clock.Now().Add(time.Minute))
			}
			f.waitFor("the workload and the check in the cache", func() bool {
				_, err := f.s.listers.workloads.Namespace("ml").Get("job-train")
				return f.s.ourCheck("lockstep-placement") && err == nil
			})
			f.run(queue.WorkloadKey("ml", "job-train"))
			state, msg, pin := f.checkState()
			if state != tc.wantState || !strings.Contains(msg, tc.wantMsg) {
				t.Fatalf("check %s %q; want %s containing %q", state, msg, tc.wantState, tc.wantMsg)
			}
			if tc.competitor {
				for _, o := range gpuPods("ml", "rival", "rival", 3, 0) {
					var err error
					switch o := o.(type) {
					case *corev1.Pod:
						_, err = f.client.CoreV1().Pods("ml").Create(f.ctx, o, metav1.CreateOptions{})
					case *resourcev1.ResourceClaim:
						_, err = f.client.ResourceV1().ResourceClaims("ml").Create(f.ctx, o, metav1.CreateOptions{})
					}
					if err != nil {
						t.Fatal(err)
					}
				}
				f.waitFor("the rival's pods in the cache", func() bool {
					pods, _ := f.s.listers.pods.Pods("ml").List(labels.SelectorFromSet(labels.Set{lockv1.PodGroupLabel: "rival"}))
					return len(pods) == 3
				})
				f.run(queue.GroupKey("ml", "rival"))
				if n := f.pod("ml", "rival-0").Spec.NodeName; n != "" {
					t.Fatalf("the rival was bound to %s: it took the room the check held for the Job", n)
				}
			}
			nodes := f.admit(pin)
			switch {
			case state == kueuecheck.StateReady && (len(nodes) != 3 || nodes[0] != "gpu-3" || nodes[1] != "gpu-3" || nodes[2] != "gpu-3"):
				t.Errorf("the check passed the gang (pinned %v) but the scheduler bound it to %v, want all 3 on gpu-3 (rack-3)", pin, nodes)
			case state == kueuecheck.StateRetry && len(nodes) > 0:
				t.Errorf("the check retried the gang (%q) but the scheduler bound it to %v", msg, nodes)
			}
			if state == kueuecheck.StateReady && pin["example.com/rack"] != "rack-3" {
				t.Errorf("the check pins %v, want example.com/rack: rack-3", pin)
			}
		})
	}
}

// rackGang is a 3-rank gang required in one rack.
func rackGang(name string) *lockv1.PodGroup {
	pg := builders.GangPodGroup("ml", name, 3)
	pg.Spec.SchedulingConstraints = &lockv1.PodGroupSchedulingConstraints{Topology: []lockv1.TopologyConstraint{{Key: "example.com/rack"}}}
	return pg
}

// A check paced because nothing else waited in its ClusterQueue (a
// workload that cannot be placed, retried a moment ago, alone) is answered
// at once when another workload starts waiting there: the quota the first
// holds goes to the second without waiting out the pace.
func TestPacedCheckAnsweredWhenAnotherWaits(t *testing.T) {
	taint := rack3Broken()
	// Retried once, just now (Kueue reset the check to Pending).
	retried := strings.Replace(checkedWorkload, "{name: lockstep-placement, state: Pending,", "{name: lockstep-placement, state: Pending, retryCount: 1,", 1)
	f := newFixtureAPI(t, zonedRacks, fixtureAPI{kueue: true, check: true}, objects(busy(), kueueObjects(t, retried), []runtime.Object{
		taint, rackGang("train"), builders.ClaimTemplate("ml", "one-gpu", "gpu.example.com", 1), localQueue("ml", "team", "gpus"),
	})...)
	k := queue.WorkloadKey("ml", "job-train")
	f.waitFor("the workload, the check and the LocalQueue in the caches", func() bool {
		_, err := f.s.listers.workloads.Namespace("ml").Get("job-train")
		_, lqErr := f.s.localQueues.get("ml", "team")
		return f.s.ourCheck("lockstep-placement") && err == nil && lqErr == nil
	})
	f.run(k)
	if got := f.queue.of(k); !strings.HasSuffix(got, "WaitFor") {
		t.Fatalf("the retried workload alone in its ClusterQueue: %q, want its check paced (WaitFor)", got)
	}
	before := f.queue.of(k)
	rival := kueueObjects(t, `
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: job-rival, namespace: ml, uid: wl-rival}
spec: {queueName: team, podSets: [{name: main, count: 2, template: {spec: {containers: [{name: c, image: x}]}}}]}
`)[0].(*unstructured.Unstructured)
	if _, err := f.dyn.Resource(kueuecheck.WorkloadResource).Namespace("ml").Create(f.ctx, rival, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitFor("the paced check added again", func() bool { return f.queue.of(k) == before+",Add" })
}
