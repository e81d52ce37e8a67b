package webhook

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/google/go-cmp/cmp"
	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/jobset"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// A pod naming its group in spec.schedulingGroup gets the membership label,
// so it stays in its group where the API server drops the field, and the
// answer warns there that the field is dropped.
func TestPodDefaulterMapsSchedulingGroup(t *testing.T) {
	pod := builders.MakePod().Namespace("team-a").Name("rank-0").Scheduler(lockv1.SchedulerName).Obj()
	pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("train")}
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}}}
	for _, drops := range []bool{true, false} {
		d := &PodDefaulter{reads: validator().reads}
		h := podMutator{inner: admission.WithDefaulter[*corev1.Pod](podgroup.Scheme(), d).Handler, dropsSchedulingGroup: drops}
		resp := h.Handle(context.Background(), req)
		if !resp.Allowed {
			t.Fatalf("drops=%v: want allowed, got %+v", drops, resp.Result)
		}
		labelled := false
		for _, p := range resp.Patches {
			labelled = labelled || strings.Contains(p.Path, "/metadata/labels") && strings.Contains(mustJSON(t, p.Value), "train")
		}
		if !labelled {
			t.Errorf("drops=%v: want the label %s=train patched in, got %v", drops, lockv1.PodGroupLabel, resp.Patches)
		}
		warned := len(resp.Warnings) == 1 && strings.Contains(resp.Warnings[0], "spec.schedulingGroup is not served")
		if warned != drops {
			t.Errorf("drops=%v: warnings %q", drops, resp.Warnings)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A Lockstep pod with spec.nodeName and claims never has its claims
// allocated: admitted, with a warning saying what to do instead.
func TestPodValidatorWarnsOnPresetNodeNameWithClaims(t *testing.T) {
	pod := builders.MakePod().Namespace("team-a").Name("p").Scheduler(lockv1.SchedulerName).Node("worker-1").ClaimTemplate("gpu", "one-gpu").Obj()
	warnings, err := validator().ValidateCreate(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, w := range warnings {
		found = found || strings.Contains(w, "spec.nodeName is set (worker-1)") && strings.Contains(w, "nodeSelector kubernetes.io/hostname: worker-1")
	}
	if !found {
		t.Errorf("want the nodeName warning, got %q", warnings)
	}
	pod.Spec.NodeName = ""
	warnings, _ = validator().ValidateCreate(context.Background(), pod)
	for _, w := range warnings {
		if strings.Contains(w, "spec.nodeName") {
			t.Errorf("warned without nodeName: %q", w)
		}
	}
}

// A gang JobSet's groups are written into its replicated jobs' templates at
// admission (one group, or one per replicated job), so its Jobs' pods are
// created in their groups; a JobSet that is not a gang is left alone.
func TestJobDefaulterWritesJobSetGroups(t *testing.T) {
	mk := func(scope string) *jobsetv1.JobSet {
		js := builders.JobSet("team-a", "trainer",
			builders.ReplicatedJob("driver", 1, 1, builders.MakePod().Scheduler(lockv1.SchedulerName).Obj()),
			builders.ReplicatedJob("workers", 2, 2, builders.MakePod().Scheduler(lockv1.SchedulerName).Obj()))
		if scope != "" {
			js.Annotations = map[string]string{jobintegration.GangScopeAnnotation: scope}
		}
		return js
	}
	d := JobDefaulter{Integration: jobset.Integration{}}
	for scope, want := range map[string][]string{"": {"trainer", "trainer"}, jobintegration.ScopeRole: {"trainer-driver", "trainer-workers"}} {
		js := mk(scope)
		if err := d.Default(context.Background(), js); err != nil {
			t.Fatal(err)
		}
		for i, rj := range js.Spec.ReplicatedJobs {
			if got := rj.Template.Spec.Template.Labels[lockv1.PodGroupLabel]; got != want[i] {
				t.Errorf("scope %q: replicated job %s's template joins %q, want %q", scope, rj.Name, got, want[i])
			}
		}
	}
	js := mk("")
	js.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.SchedulerName = ""
	if err := d.Default(context.Background(), js); err != nil {
		t.Fatal(err)
	}
	for _, rj := range js.Spec.ReplicatedJobs {
		if g, ok := rj.Template.Spec.Template.Labels[lockv1.PodGroupLabel]; ok {
			t.Errorf("a JobSet that is not a gang got group %q on %s", g, rj.Name)
		}
	}
}

// A gang job's pod that arrives without its group (a Job with
// generateName, a LeaderWorkerSet's) joins it with the mark of its job, so
// it joins only a group that job controls; a pod of a job that is no gang
// is left alone.
func TestPodDefaulterPutsAJobsPodInItsGang(t *testing.T) {
	gang := builders.IndexedJob("team-a", "train", 2, builders.MakePod().Scheduler(lockv1.SchedulerName).Obj())
	gang.UID = "train-uid"
	single := builders.IndexedJob("team-a", "single", 1, builders.MakePod().Scheduler(lockv1.SchedulerName).Obj())
	single.UID = "single-uid"
	for name, tc := range map[string]struct {
		job        *batchv1.Job
		wantLabels map[string]string
		wantAnnots map[string]string
	}{
		"a gang Job's pod":               {job: gang, wantLabels: map[string]string{lockv1.PodGroupLabel: "train"}, wantAnnots: map[string]string{lockv1.GangOfAnnotation: "Job.batch/train"}},
		"a pod of a Job that is no gang": {job: single},
	} {
		t.Run(name, func(t *testing.T) {
			pod := ownedBy(builders.MakePod().Namespace("team-a").Name(tc.job.Name+"-0").Scheduler(lockv1.SchedulerName).Obj(), tc.job)
			d := &PodDefaulter{reads: validator(gang, single).reads}
			if err := d.Default(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.wantLabels, pod.Labels); d != "" {
				t.Errorf("labels (-want,+got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantAnnots, pod.Annotations); d != "" {
				t.Errorf("annotations (-want,+got):\n%s", d)
			}
		})
	}
}
