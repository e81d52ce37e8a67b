package preemption

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/lockstep-dev/lockstep/internal/clusterspec"
	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// world builds cluster state: running workloads are placed by the real
// placement code and recorded as bound pods with reserved claims.
type world struct {
	t     *testing.T
	in    snapshot.Input
	start time.Time
}

func newWorld(t *testing.T) *world {
	return &world{t: t, in: builders.SnapshotInput(t, clusterspec.PreemptionYAML), start: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}
}

type kind int

const (
	gpu kind = iota
	accel
	cpu
)

// members makes n pending pods name-0..n-1; gpu pods get their own claim
// for one device, accel pods request one example.com/accel.
func (w *world) members(name string, n int, k kind) []placement.Member {
	var ms []placement.Member
	for i := 0; i < n; i++ {
		podName := fmt.Sprintf("%s-%d", name, i)
		b := builders.MakePod().Namespace("ns").Name(podName).Req(corev1.ResourceCPU, "1").Label("app", name)
		if k == accel {
			b = b.Req("example.com/accel", "1")
		}
		m := placement.Member{}
		if k == gpu {
			b = b.ClaimTemplate("gpu", "one-gpu")
		}
		m.Pod = b.Obj()
		m.Pod.UID = types.UID(podName)
		if k == gpu {
			claim := builders.Claim("ns", podName+"-gpu", "gpu.example.com", 1)
			w.in.Claims = append(w.in.Claims, claim)
			m.Pod.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To(claim.Name)}}
			m.Claims = []types.NamespacedName{{Namespace: "ns", Name: claim.Name}}
		}
		ms = append(ms, m)
	}
	return ms
}

// run places a gang of n and records it running, started age ago.
func (w *world) run(name string, n int, k kind, age time.Duration) []*corev1.Pod {
	w.t.Helper()
	_, ctx := ktesting.NewTestContext(w.t)
	ms := w.members(name, n, k)
	snap := snapshot.New(w.in)
	res, err := placement.Place(ctx, snap, dra.New(snap, dra.NewCache()), placement.Unit{Members: ms, MinCount: n, Gang: true})
	if err != nil || len(res.Assignments) != n {
		w.t.Fatalf("running %s: placed %d of %d (%v)", name, len(res.Assignments), n, err)
	}
	var pods []*corev1.Pod
	for _, a := range res.Assignments {
		p := a.Pod.DeepCopy()
		p.Spec.NodeName = a.Node
		p.Status.Phase = corev1.PodRunning
		p.Status.StartTime = &metav1.Time{Time: w.start.Add(-age)}
		w.in.Pods = append(w.in.Pods, p)
		pods = append(pods, p)
		for _, c := range a.Claims {
			w.setClaim(c, p)
		}
	}
	return pods
}

func (w *world) setClaim(c *resourcev1.ResourceClaim, p *corev1.Pod) {
	for i, old := range w.in.Claims {
		if old.Namespace == c.Namespace && old.Name == c.Name {
			cp := c.DeepCopy()
			cp.Status.ReservedFor = append(old.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: p.Name, UID: p.UID})
			w.in.Claims[i] = cp
			return
		}
	}
	w.t.Fatalf("claim %s not in the world", c.Name)
}

func whole(name string, prio int32, pods []*corev1.Pod) Candidate {
	return Candidate{Name: "PodGroup ns/" + name, Group: types.NamespacedName{Namespace: "ns", Name: name}, Priority: prio, Pods: pods, Whole: true}
}

func singles(name string, prio int32, pods []*corev1.Pod) []Candidate {
	var out []Candidate
	for _, p := range pods {
		out = append(out, Candidate{Name: "pod ns/" + p.Name, Group: types.NamespacedName{Namespace: "ns", Name: name}, Priority: prio, Pods: []*corev1.Pod{p}})
	}
	return out
}

func victimPods(p *Plan) []string {
	var out []string
	for _, v := range p.Victims {
		for _, pod := range v.Pods {
			out = append(out, pod.Name)
		}
	}
	sort.Strings(out)
	return out
}

func TestFind(t *testing.T) {
	cases := []struct {
		name string
		// setup runs workloads and returns the candidates and PDBs.
		setup func(w *world) ([]Candidate, []*policyv1.PodDisruptionBudget)
		// preemptor: a gang of n of kind k at priority prio.
		n    int
		k    kind
		prio int32
		// wantVictims are pod names; nil with wantWhy means no plan.
		wantVictims []string
		wantWhy     string
		wantPDBs    []string
		// wantPlaced: how many members the nominated placement places.
		wantPlaced int
	}{{
		name: "DRA: a lower-priority gang holding 4 of 6 GPUs goes whole",
		setup: func(w *world) ([]Candidate, []*policyv1.PodDisruptionBudget) {
			return []Candidate{whole("low", 100, w.run("low", 4, gpu, time.Hour))}, nil
		},
		n: 4, k: gpu, prio: 10000,
		wantVictims: []string{"low-0", "low-1", "low-2", "low-3"}, wantPlaced: 4,
	}, {
		name: "extended resource: the same with example.com/accel",
		setup: func(w *world) ([]Candidate, []*policyv1.PodDisruptionBudget) {
			return []Candidate{whole("low", 100, w.run("low", 4, accel, time.Hour))}, nil
		},
		n: 4, k: accel, prio: 10000,
		wantVictims: []string{"low-0", "low-1", "low-2", "low-3"}, wantPlaced: 4,
	}, {
		name: "disruptionMode single: only the pods needed",
		setup: func(w *world) ([]Candidate, []*policyv1.PodDisruptionBudget) {
			return singles("low", 100, w.run("low", 4, gpu, time.Hour)), nil
		},
		n: 4, k: gpu, prio: 10000,
		wantPlaced: 4,
	}, {
		name: "equal priority is never a victim",
		setup: func(w *world) ([]Candidate, []*policyv1.PodDisruptionBudget) {
			return []Candidate{whole("low", 10000, w.run("low", 4, gpu, time.Hour))}, nil
		},
		n: 4, k: gpu, prio: 10000,
		wantWhy: "no running pods of lower priority on the nodes the unit can use",
	}, {
		name: "futile: 7 GPUs on a 6-GPU cluster evicts nothing",
		setup: func(w *world) ([]Candidate, []*policyv1.PodDisruptionBudget) {
			return []Candidate{whole("low", 100, w.run("low", 4, gpu, time.Hour))}, nil
		},
		n: 7, k: gpu, prio: 10000,
		wantWhy: "evicting all 1 lower-priority candidates would not make room",
	}, {
		name: "lowest priority first",
		setup: func(w *world) ([]Candidate, []*policyv1.PodDisruptionBudget) {
			return []Candidate{
				whole("mid", 500, w.run("mid", 2, gpu, time.Minute)),
				whole("low", 100, w.run("low", 2, gpu, time.Hour)),
			}, nil
		},
		n: 4, k: gpu, prio: 10000,
		wantVictims: []string{"low-0", "low-1"}, wantPlaced: 4,
	}, {
		name: "same priority: the most recently started loses least work",
		setup: func(w *world) ([]Candidate, []*policyv1.PodDisruptionBudget) {
			return []Candidate{
				whole("old", 100, w.run("old", 2, gpu, 10*time.Hour)),
				whole("new", 100, w.run("new", 2, gpu, time.Minute)),
			}, nil
		},
		n: 4, k: gpu, prio: 10000,
		wantVictims: []string{"new-0", "new-1"}, wantPlaced: 4,
	}, {
		name: "a PodDisruptionBudget is honoured where a choice exists",
		setup: func(w *world) ([]Candidate, []*policyv1.PodDisruptionBudget) {
			return []Candidate{
					whole("old", 100, w.run("old", 2, gpu, 10*time.Hour)),
					whole("new", 100, w.run("new", 2, gpu, time.Minute)),
				}, []*policyv1.PodDisruptionBudget{
					pdb("new-pdb", "new", 0),
				}
		},
		n: 4, k: gpu, prio: 10000,
		wantVictims: []string{"old-0", "old-1"}, wantPlaced: 4,
	}, {
		name: "a PodDisruptionBudget that must be violated is reported",
		setup: func(w *world) ([]Candidate, []*policyv1.PodDisruptionBudget) {
			return []Candidate{whole("low", 100, w.run("low", 4, gpu, time.Hour))}, []*policyv1.PodDisruptionBudget{pdb("low-pdb", "low", 1)}
		},
		n: 4, k: gpu, prio: 10000,
		wantVictims: []string{"low-0", "low-1", "low-2", "low-3"}, wantPDBs: []string{"ns/low-pdb"}, wantPlaced: 4,
	}, {
		name: "pods on nodes the preemptor cannot use are not victims",
		setup: func(w *world) ([]Candidate, []*policyv1.PodDisruptionBudget) {
			// cpu pods at priority 0 fill the accel nodes; the GPU gang cannot use those nodes.
			return []Candidate{
				whole("filler", 0, w.run("filler", 2, accel, time.Minute)),
				whole("low", 100, w.run("low", 4, gpu, time.Hour)),
			}, nil
		},
		n: 4, k: gpu, prio: 10000,
		wantVictims: []string{"low-0", "low-1", "low-2", "low-3"}, wantPlaced: 4,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			w := newWorld(t)
			cands, pdbs := tc.setup(w)
			ms := w.members("urgent", tc.n, tc.k)
			snap := snapshot.New(w.in)
			allocated := snap.Allocated.Clone()
			unit := placement.Unit{Members: ms, MinCount: tc.n, Gang: true}
			plan, why, err := Find(ctx, snap, dra.New(snap, dra.NewCache()), Input{Unit: unit, Priority: tc.prio, Candidates: cands, PDBs: pdbs})
			if err != nil {
				t.Fatal(err)
			}
			if !snap.Allocated.Equal(allocated) {
				t.Errorf("Find changed the snapshot's allocated devices")
			}
			if tc.wantWhy != "" {
				if plan != nil || why != tc.wantWhy {
					t.Fatalf("want no plan because %q; got plan %v, why %q", tc.wantWhy, plan, why)
				}
				return
			}
			if plan == nil {
				t.Fatalf("no plan: %s", why)
			}
			if tc.wantVictims != nil {
				if diff := cmp.Diff(tc.wantVictims, victimPods(plan)); diff != "" {
					t.Errorf("victims (-want,+got):\n%s", diff)
				}
			}
			if diff := cmp.Diff(tc.wantPDBs, plan.ViolatedPDBs); diff != "" {
				t.Errorf("violated PDBs (-want,+got):\n%s", diff)
			}
			if got := len(plan.Placement.Assignments); got != tc.wantPlaced {
				t.Errorf("nominated placement: %d placed, want %d", got, tc.wantPlaced)
			}
			// The plan is proven: placing the preemptor on the snapshot
			// without the victims succeeds.
			for _, v := range plan.Victims {
				for _, p := range v.Pods {
					snap.RemovePod(p, snapshot.PodRequests(p, snap.Features), snapshot.HostPorts(p))
					for _, c := range reservedClaims(snap, p) {
						snap.Release(snapshot.ClaimDevices(c)...)
					}
				}
			}
			res, err := placement.Place(ctx, snap, dra.New(snap, dra.NewCache()), unit)
			if err != nil || len(res.Assignments) != tc.n {
				t.Errorf("after evicting the victims the preemptor places %d of %d (%v)", len(res.Assignments), tc.n, err)
			}
		})
	}
}

// TestFindSingleModeEvictsOnlyWhatIsNeeded: with 2 GPUs free, a 4-GPU gang
// needs 2 pods of a single-mode victim, not 4.
func TestFindSingleModeEvictsOnlyWhatIsNeeded(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	w := newWorld(t)
	cands := singles("low", 100, w.run("low", 4, gpu, time.Hour))
	ms := w.members("urgent", 4, gpu)
	snap := snapshot.New(w.in)
	plan, why, err := Find(ctx, snap, dra.New(snap, dra.NewCache()), Input{Unit: placement.Unit{Members: ms, MinCount: 4, Gang: true}, Priority: 10000, Candidates: cands})
	if err != nil || plan == nil {
		t.Fatalf("no plan: %s %v", why, err)
	}
	if got := plan.VictimPods(); got != 2 {
		t.Errorf("single mode: %d pods evicted, want 2 (%v)", got, victimPods(plan))
	}
}

// TestFindCountsOnTerminatingPods: victims already going are waited for,
// not joined by new ones; stuck ones are neither counted on nor evicted.
func TestFindCountsOnTerminatingPods(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	w := newWorld(t)
	low := w.run("low", 4, gpu, time.Hour)
	other := w.run("other", 2, gpu, time.Minute)
	for _, p := range low {
		p.DeletionTimestamp = &metav1.Time{Time: w.start}
	}
	ms := w.members("urgent", 4, gpu)
	snap := snapshot.New(w.in)
	in := Input{Unit: placement.Unit{Members: ms, MinCount: 4, Gang: true}, Priority: 10000,
		Candidates: []Candidate{whole("low", 100, low), whole("other", 100, other)}}
	plan, why, err := Find(ctx, snap, dra.New(snap, dra.NewCache()), in)
	if err != nil || plan == nil {
		t.Fatalf("no plan: %s %v", why, err)
	}
	if len(plan.Victims) != 0 || len(plan.Terminating) != 1 {
		t.Errorf("want to wait for the terminating gang only; victims %v, terminating %d", victimPods(plan), len(plan.Terminating))
	}

	in.Stuck = sets.New[types.UID]()
	for _, p := range low {
		in.Stuck.Insert(p.UID)
	}
	plan, why, err = Find(ctx, snap, dra.New(snap, dra.NewCache()), in)
	if err != nil {
		t.Fatal(err)
	}
	if plan != nil {
		t.Errorf("the stuck gang holds 4 GPUs, 2 remain to take: want no plan, got victims %v", victimPods(plan))
	} else if want := "evicting all 1 lower-priority candidates would not make room"; why != want {
		t.Errorf("why = %q, want %q", why, want)
	}
}

// TestFindSharedClaimFreedOnlyWithAllUsers: two pods share one claim for
// both GPUs of a node; evicting one of them frees nothing.
func TestFindSharedClaimFreedOnlyWithAllUsers(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	w := newWorld(t)
	// Fill every GPU: one shared claim for 2 GPUs used by two pods, and a
	// gang of 4 with one GPU each.
	shared := builders.Claim("ns", "shared", "gpu.example.com", 2)
	w.in.Claims = append(w.in.Claims, shared)
	var ms []placement.Member
	for i := 0; i < 2; i++ {
		p := builders.MakePod().Namespace("ns").Name(fmt.Sprintf("sh-%d", i)).Req(corev1.ResourceCPU, "1").Claim("gpu", "shared").Obj()
		p.UID = types.UID(p.Name)
		ms = append(ms, placement.Member{Pod: p, Claims: []types.NamespacedName{{Namespace: "ns", Name: "shared"}}})
	}
	snap := snapshot.New(w.in)
	res, err := placement.Place(ctx, snap, dra.New(snap, dra.NewCache()), placement.Unit{Members: ms, MinCount: 2, Gang: true})
	if err != nil || len(res.Assignments) != 2 {
		t.Fatalf("placing the sharing pods: %v %v", res, err)
	}
	var sh []*corev1.Pod
	for _, a := range res.Assignments {
		p := a.Pod.DeepCopy()
		p.Spec.NodeName = a.Node
		w.in.Pods = append(w.in.Pods, p)
		sh = append(sh, p)
		if a.NewlyAllocated[0] {
			w.setClaim(a.Claims[0], p)
		}
	}
	for i, c := range w.in.Claims {
		if c.Name == "shared" {
			c = c.DeepCopy()
			c.Status.ReservedFor = nil
			for _, p := range sh {
				c.Status.ReservedFor = append(c.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: p.Name, UID: p.UID})
			}
			w.in.Claims[i] = c
		}
	}
	gang := w.run("gang", 4, gpu, 10*time.Hour)
	urgent := w.members("urgent", 2, gpu)
	snap = snapshot.New(w.in)
	cands := append(singles("sh", 100, sh), whole("gang", 200, gang))
	plan, why, err := Find(ctx, snap, dra.New(snap, dra.NewCache()), Input{Unit: placement.Unit{Members: urgent, MinCount: 2, Gang: true}, Priority: 10000, Candidates: cands})
	if err != nil || plan == nil {
		t.Fatalf("no plan: %s %v", why, err)
	}
	// Both users of the shared claim (priority 100) free 2 GPUs; one alone
	// frees nothing, and the gang (priority 200) is dearer.
	if diff := cmp.Diff([]string{"sh-0", "sh-1"}, victimPods(plan)); diff != "" {
		t.Errorf("victims (-want,+got):\n%s", diff)
	}
}

func pdb(name, app string, allowed int32) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
	}
}
