package scheduler

import (
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/lockstep-dev/lockstep/internal/decide"
	"github.com/lockstep-dev/lockstep/internal/explain"
	"github.com/lockstep-dev/lockstep/internal/queue"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// decideNow is the scheduler's decision for k on its own cycle state,
// without preemption (what explain's answer must match).
func (f *fixture) decideNow(k queue.Key) decide.Decision {
	f.t.Helper()
	u, err := f.s.resolve(k)
	if err != nil || u == nil {
		f.t.Fatalf("resolving %s: %v", k, err)
	}
	prio, _ := f.s.order(k)
	return decide.Decide(f.ctx, f.s.state.Snapshot(f.ctx, k.String(), prio), f.s.state.CEL, decide.Input{Unit: u.tree, Priority: prio})
}

// explainGroup runs `lockstep explain podgroup` against the fixture's API.
func (f *fixture) explainGroup(ns, name string) *explain.Report {
	f.t.Helper()
	r, err := explain.Run(f.ctx, f.client, f.dyn, explain.Target{Kind: "podgroup", Namespace: ns, Name: name})
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

// explain and the scheduler see a device tainted only by a DeviceTaintRule
// alike: taken. Both say one of the gang's two pods fits, with the same
// arithmetic.
func TestExplainAgreesOnDeviceTaintRules(t *testing.T) {
	rule := &resourcev1.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-0-broken"},
		Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: ptr.To("gpu.example.com"), Pool: ptr.To("gpu-0"), Device: ptr.To("gpu-0")},
			Taint:          resourcev1.DeviceTaint{Key: "example.com/broken", Value: "ecc", Effect: resourcev1.DeviceTaintEffectNoSchedule},
		},
	}
	f := newFixture(t, oneNode, objects(gpuPods("ml", "pair", "pair", 2, 0), []runtime.Object{builders.GangPodGroup("ml", "pair", 2), rule})...)
	k := queue.GroupKey("ml", "pair")
	d := f.decideNow(k)
	if d.Kind != decide.Unschedulable || !strings.Contains(d.Summary, "at most 1 of 2 pods fit") {
		t.Fatalf("scheduler: %s %q; want Unschedulable, 1 of 2 fit (the tainted device is not usable)", d.Kind, d.Summary)
	}
	r := f.explainGroup("ml", "pair")
	t.Logf("explain %q scheduler %q", r.Answer, d.Summary)
	if want := "PodGroup ml/pair is pending: " + d.Summary; r.Answer != want {
		t.Errorf("explain answers %q\nthe scheduler decided %q", r.Answer, want)
	}
}

// A nomination the scheduler holds for a higher-priority gang (its
// victims gone, its pods not bound yet) keeps a lower-priority unit out of
// the freed devices; explain, which rebuilds the nomination from the
// pods' status.nominatedNodeName, says the same.
func TestExplainAgreesOnNominations(t *testing.T) {
	low := running(gpuPods("batch", "low", "low", 2, 10), "gpu-0", 0)
	f := newFixture(t, oneNode, objects(low, gpuPods("ml", "urgent", "urgent", 2, 100), gpuPods("ml", "mid", "mid", 1, 50),
		[]runtime.Object{builders.GangPodGroup("batch", "low", 2), builders.GangPodGroup("ml", "urgent", 2), builders.GangPodGroup("ml", "mid", 1)})...)
	urgent := queue.GroupKey("ml", "urgent")
	f.run(urgent)
	if got := f.queue.of(urgent); got != "WaitFor" {
		t.Fatalf("urgent: %q, want a preemption under way", got)
	}
	// kube-controller-manager releases the victims' claims once they are
	// gone (the fake API deleted the pods at once).
	for _, n := range []string{"low-0-gpu", "low-1-gpu"} {
		c := f.claim("batch", n)
		c.Status = resourcev1.ResourceClaimStatus{}
		if _, err := f.client.ResourceV1().ResourceClaims("batch").UpdateStatus(f.ctx, c, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f.waitFor("the victims to be gone from the cache", func() bool {
		snap := f.s.state.Snapshot(f.ctx, "none", 1<<30)
		return snap.Node("gpu-0").FreeDevices() == 2
	})
	f.waitFor("urgent's nominated node in the pod cache", func() bool {
		p, err := f.s.listers.pods.Pods("ml").Get("urgent-1")
		return err == nil && p.Status.NominatedNodeName != ""
	})

	mid := queue.GroupKey("ml", "mid")
	d := f.decideNow(mid)
	if d.Kind != decide.Unschedulable {
		t.Fatalf("scheduler: mid %s %q; want Unschedulable (the devices are nominated to urgent)", d.Kind, d.Summary)
	}
	r := f.explainGroup("ml", "mid")
	if want := "PodGroup ml/mid is pending: " + d.Summary; r.Answer != want {
		t.Errorf("explain answers %q\nthe scheduler decided %q", r.Answer, want)
	}
	// And the nominee itself fits, for both.
	if d := f.decideNow(urgent); d.Kind != decide.Bind {
		t.Errorf("scheduler: urgent %s, want Bind into its nomination", d.Kind)
	}
	if r := f.explainGroup("ml", "urgent"); !strings.HasPrefix(r.Answer, "PodGroup ml/urgent fits now") {
		t.Errorf("explain: urgent %q, want it fits now", r.Answer)
	}
}
