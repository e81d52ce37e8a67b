package controlplane

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// noScheduler is a scheduler name nothing serves, so pods stay unbound until
// the test binds them.
const noScheduler = "e2e-no-scheduler"

func TestIndexedJobWithClaimTemplateGetsPerPodClaims(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 90*time.Second)
	if _, err := h.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, builders.ClaimTemplate(ns, "one-gpu", "gpu.example.com", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := builders.MakePod().Scheduler(noScheduler).ClaimTemplate("gpu", "one-gpu").Obj()
	if _, err := h.Client.BatchV1().Jobs(ns).Create(ctx, builders.IndexedJob(ns, "train", 4, pod), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, ctx, "4 pods, each with its own generated ResourceClaim", func(ctx context.Context) (bool, string, error) {
		pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		claims, err := h.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		owner := map[string]string{}
		for _, c := range claims.Items {
			for _, o := range c.OwnerReferences {
				if o.Kind == "Pod" {
					owner[c.Name] = o.Name
				}
			}
		}
		linked := 0
		for _, p := range pods.Items {
			for _, s := range p.Status.ResourceClaimStatuses {
				if s.ResourceClaimName != nil && owner[*s.ResourceClaimName] == p.Name {
					linked++
				}
			}
		}
		return len(pods.Items) == 4 && linked == 4,
			fmt.Sprintf("%d pods, %d claims, %d pods linked to their own claim", len(pods.Items), len(claims.Items), linked), nil
	})
}

func TestBoundPodBecomesRunning(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 60*time.Second)
	pod := createAndBind(t, ctx, h, builders.MakePod().Namespace(ns).Name("p").Scheduler(noScheduler).Req(corev1.ResourceCPU, "1").Obj(), "worker-1")
	waitPhase(t, ctx, h, ns, pod.Name, corev1.PodRunning)
	got, err := h.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.NodeName != "worker-1" || got.Status.PodIP == "" {
		t.Errorf("running pod: node %q (want worker-1), podIP %q (want one)", got.Spec.NodeName, got.Status.PodIP)
	}
}

func TestSimulatedPodFinishesAfterAnnotatedDuration(t *testing.T) {
	tests := map[string]struct {
		annotation string
		want       corev1.PodPhase
	}{
		"succeed-after": {annotation: "sim.lockstep.dev/succeed-after", want: corev1.PodSucceeded},
		"fail-after":    {annotation: "sim.lockstep.dev/fail-after", want: corev1.PodFailed},
	}
	h := harness.Get(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ns := h.Namespace(t)
			ctx := harness.Context(t, 60*time.Second)
			pod := builders.MakePod().Namespace(ns).Name("p").Scheduler(noScheduler).Annotation(tc.annotation, "3s").Obj()
			pod.Spec.RestartPolicy = corev1.RestartPolicyNever
			createAndBind(t, ctx, h, pod, "worker-0")
			waitPhase(t, ctx, h, ns, "p", corev1.PodRunning)
			running := time.Now()
			waitPhase(t, ctx, h, ns, "p", tc.want)
			// The simulator must wait for the annotated duration, not finish at once.
			if waited := time.Since(running); waited < 2*time.Second {
				t.Errorf("pod reached %s %s after Running; want about 3s", tc.want, waited)
			}
		})
	}
	// A pod without the annotation keeps running.
	ns := h.Namespace(t)
	ctx := harness.Context(t, 60*time.Second)
	createAndBind(t, ctx, h, builders.MakePod().Namespace(ns).Name("forever").Scheduler(noScheduler).Obj(), "worker-2")
	waitPhase(t, ctx, h, ns, "forever", corev1.PodRunning)
	time.Sleep(5 * time.Second)
	if p, err := h.Client.CoreV1().Pods(ns).Get(ctx, "forever", metav1.GetOptions{}); err != nil || p.Status.Phase != corev1.PodRunning {
		t.Errorf("unannotated pod: want still Running after 5s, got %v (err %v)", p.Status.Phase, err)
	}
}

func TestClaimAllocationWrittenByClientIsVisible(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 60*time.Second)
	claim, err := h.Client.ResourceV1().ResourceClaims(ns).Create(ctx, builders.Claim(ns, "c", "gpu.example.com", 1), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := h.Client.CoreV1().Pods(ns).Create(ctx, builders.MakePod().Namespace(ns).Name("user").Scheduler(noScheduler).Claim("gpu", "c").Obj(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claim.Status.Allocation = &resourcev1.AllocationResult{
		Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
			Request: "dev", Driver: "gpu.example.com", Pool: "worker-2", Device: "gpu-1",
		}}},
		NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"worker-2"}}},
		}}},
	}
	claim.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}}
	if _, err := h.Client.ResourceV1().ResourceClaims(ns).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("writing the allocation: %v", err)
	}
	got, err := h.Client.ResourceV1().ResourceClaims(ns).Get(ctx, "c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := got.Status.Allocation
	if a == nil || len(a.Devices.Results) != 1 || a.Devices.Results[0].Device != "gpu-1" || a.Devices.Results[0].Pool != "worker-2" {
		t.Fatalf("allocation read back: want worker-2/gpu-1, got %+v", a)
	}
	if len(got.Status.ReservedFor) != 1 || got.Status.ReservedFor[0].UID != pod.UID {
		t.Errorf("reservedFor: want pod %s, got %+v", pod.UID, got.Status.ReservedFor)
	}
	// The pod binds to the node of its allocation and runs.
	bind(t, ctx, h, pod, "worker-2")
	waitPhase(t, ctx, h, ns, "user", corev1.PodRunning)
}

func createAndBind(t *testing.T, ctx context.Context, h *harness.Harness, pod *corev1.Pod, node string) *corev1.Pod {
	t.Helper()
	created, err := h.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bind(t, ctx, h, created, node)
	return created
}

func bind(t *testing.T, ctx context.Context, h *harness.Harness, pod *corev1.Pod, node string) {
	t.Helper()
	err := h.Client.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("binding %s to %s: %v", pod.Name, node, err)
	}
}

func waitPhase(t *testing.T, ctx context.Context, h *harness.Harness, ns, name string, want corev1.PodPhase) {
	t.Helper()
	harness.Eventually(t, ctx, fmt.Sprintf("pod %s %s", name, want), func(ctx context.Context) (bool, string, error) {
		p, err := h.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return p.Status.Phase == want, "phase " + string(p.Status.Phase), nil
	})
}

func gangPodGroup(ns, name string, minCount int32) *schedulingv1beta1.PodGroup {
	return &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: schedulingv1beta1.PodGroupSpec{
			SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}},
		},
	}
}
