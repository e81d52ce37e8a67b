package webhook

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
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
