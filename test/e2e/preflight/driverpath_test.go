package preflight

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// Admission checks the driver path per node pool, both ways, on the
// EKS-shaped cluster: a Job asking for a claim of DeviceClass
// gpu.nvidia.com whose pods select the Auto Mode pool (device plugin only)
// is warned, naming the pool it reaches and the one that publishes the
// class (p5-dra, reserved-l40s); a Job asking for the device plugin's nvidia.com/gpu
// whose pods select the DRA pool is warned, naming the pools that
// advertise it; each is quiet when it selects the right pool.
func TestAdmissionChecksTheDriverPath(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	w := &harness.Warnings{}
	cfg := rest.CopyConfig(h.Config)
	cfg.WarningHandler = w
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, builders.ClaimTemplate(ns, "one-gpu", "gpu.nvidia.com", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	auto := map[string]string{"eks.amazonaws.com/compute-type": "auto"}
	dra := map[string]string{"eks.amazonaws.com/nodegroup": "p5-dra"}
	for _, tc := range []struct {
		name     string
		selector map[string]string
		claim    bool
		want     string
	}{
		{name: "claim-on-auto", selector: auto, claim: true,
			want: `none of which publishes a device of DeviceClass "gpu.nvidia.com" (pools that do: p5-dra, reserved-l40s)`},
		{name: "claim-on-dra", selector: dra, claim: true},
		{name: "plugin-on-dra", selector: dra,
			want: `asks for "nvidia.com/gpu", but its node selection reaches 2 nodes (pools p5-dra), none of which advertises it or publishes a device of a DeviceClass that serves it (pools that do: general-purpose, spot-gpus)`},
		{name: "plugin-on-auto", selector: auto},
	} {
		var pod *corev1.Pod
		if tc.claim {
			pod = builders.MakePod().Scheduler(lockv1.SchedulerName).ClaimTemplate("gpu", "one-gpu").Obj()
		} else {
			pod = builders.MakePod().Scheduler(lockv1.SchedulerName).Req("nvidia.com/gpu", "1").Obj()
		}
		pod.Spec.NodeSelector = tc.selector
		job := builders.IndexedJob(ns, tc.name, 2, pod)
		job.Spec.Suspend = ptr.To(true)
		w.Reset()
		if _, err := client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := w.All()
		switch {
		case tc.want != "" && !strings.Contains(got, tc.want):
			t.Errorf("%s: warnings %q, want one containing %q", tc.name, got, tc.want)
		case tc.want == "" && (strings.Contains(got, "none of which") || strings.Contains(got, "asks for")):
			t.Errorf("%s: selects a pool that offers its devices, yet warned %q", tc.name, got)
		}
	}
}
