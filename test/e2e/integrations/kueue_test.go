package integrations

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

var kueue = schema.GroupVersion{Group: "kueue.x-k8s.io", Version: "v1beta2"}

const extendedGPU = corev1.ResourceName("example.com/gpu")

func applyKueue(t testing.TB, ctx context.Context, h *harness.Harness, resource, ns, manifest string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
		t.Fatal(err)
	}
	r := h.Dynamic.Resource(kueue.WithResource(resource))
	var err error
	if ns == "" {
		_, err = r.Create(ctx, u, metav1.CreateOptions{})
		t.Cleanup(func() { _ = r.Delete(context.Background(), u.GetName(), metav1.DeleteOptions{}) })
	} else {
		_, err = r.Namespace(ns).Create(ctx, u, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatalf("creating %s %s: %v", resource, u.GetName(), err)
	}
}

func clusterQueue(name, ns string, gpus int) string {
	return fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: %s}
spec:
  namespaceSelector:
    matchLabels: {kubernetes.io/metadata.name: %s}
  resourceGroups:
  - coveredResources: [cpu, example.com/gpu]
    flavors:
    - name: %s
      resources:
      - {name: cpu, nominalQuota: "64"}
      - {name: example.com/gpu, nominalQuota: "%d"}
`, name, ns, name, gpus)
}

// extendedGPUPod is a Lockstep pod asking for one example.com/gpu (which
// Kueue counts against quota), served by a DRA device.
func extendedGPUPod() *corev1.Pod {
	return builders.MakePod().Scheduler(lockv1.SchedulerName).Req(corev1.ResourceCPU, "1").Req(extendedGPU, "1").Obj()
}

// kueueQueue is a namespace's own Kueue queue: the DeviceClass that serves
// example.com/gpu from DRA devices, a ResourceFlavor and a ClusterQueue
// named after the namespace, with gpus GPUs of quota, and LocalQueue team.
func kueueQueue(t testing.TB, ctx context.Context, h *harness.Harness, ns string, gpus int) {
	t.Helper()
	kueueQueueSpec(t, ctx, h, ns, clusterQueue(ns, ns, gpus))
}

// kueueQueueSpec is kueueQueue with the ClusterQueue cq (a manifest, e.g.
// clusterQueue's with more of its spec).
func kueueQueueSpec(t testing.TB, ctx context.Context, h *harness.Harness, ns, cq string) {
	t.Helper()
	h.CreateDeviceClass(ctx, t, builders.ExtendedResourceClass("gpu-extended-"+ns, "gpu.example.com", string(extendedGPU)))
	applyKueue(t, ctx, h, "resourceflavors", "", fmt.Sprintf("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: %s}\n", ns))
	applyKueue(t, ctx, h, "clusterqueues", "", cq)
	applyKueue(t, ctx, h, "localqueues", ns, fmt.Sprintf("apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: team, namespace: %s}\nspec: {clusterQueue: %s}\n", ns, ns))
}

// raiseQuota sets the GPU quota of the namespace's ClusterQueue.
func raiseQuota(t *testing.T, ctx context.Context, h *harness.Harness, ns string, gpus int) {
	t.Helper()
	cq, err := h.Dynamic.Resource(kueue.WithResource("clusterqueues")).Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	groups, _, _ := unstructured.NestedSlice(cq.Object, "spec", "resourceGroups")
	flavors := groups[0].(map[string]any)["flavors"].([]any)
	flavors[0].(map[string]any)["resources"].([]any)[1].(map[string]any)["nominalQuota"] = strconv.Itoa(gpus)
	if err := unstructured.SetNestedSlice(cq.Object, groups, "spec", "resourceGroups"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Dynamic.Resource(kueue.WithResource("clusterqueues")).Update(ctx, cq, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Kueue decides when, Lockstep where: a ClusterQueue with 4 GPUs of quota
// and two 4-rank Jobs (example.com/gpu: 1 per rank, served by DRA) → Kueue
// admits one, Lockstep binds it whole; the other stays suspended and holds
// nothing; raising the quota admits the second, which Lockstep binds whole.
func TestKueueAdmitsLockstepPlaces(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	kueueQueue(t, ctx, h, ns, 4)
	for _, name := range []string{"train-a", "train-b"} {
		job := builders.IndexedJob(ns, name, 4, extendedGPUPod())
		job.Labels = map[string]string{"kueue.x-k8s.io/queue-name": "team"}
		if _, err := h.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// Kueue's webhook suspended it at creation.
		got, err := h.Client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Spec.Suspend == nil || !*got.Spec.Suspend {
			t.Fatalf("Job %s not suspended by Kueue at creation", name)
		}
	}
	state := func(ctx context.Context, name string) (suspended bool, pods, bound int, err error) {
		job, err := h.Client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, 0, 0, err
		}
		list, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + name})
		if err != nil {
			return false, 0, 0, err
		}
		for _, p := range list.Items {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return job.Spec.Suspend != nil && *job.Spec.Suspend, len(list.Items), bound, nil
	}
	var admitted, waiting string
	harness.Eventually(t, ctx, "Kueue admits one Job, Lockstep binds it 4/4; the other stays suspended with no pods", func(ctx context.Context) (bool, string, error) {
		sa, pa, ba, err := state(ctx, "train-a")
		if err != nil {
			return false, "", err
		}
		sb, pb, bb, err := state(ctx, "train-b")
		if err != nil {
			return false, "", err
		}
		switch {
		case !sa && ba == 4 && sb && pb == 0:
			admitted, waiting = "train-a", "train-b"
		case !sb && bb == 4 && sa && pa == 0:
			admitted, waiting = "train-b", "train-a"
		}
		return admitted != "", fmt.Sprintf("train-a suspended %v, %d pods, %d bound; train-b suspended %v, %d pods, %d bound", sa, pa, ba, sb, pb, bb), nil
	})
	r := h.Explain(t, ns, "job", waiting)
	if want := "Job " + waiting + " is suspended"; r.Members != 0 || r.Bound != 0 || !strings.Contains(r.Answer, want) {
		t.Errorf("explain job %s: want no members and %q, got members %d, bound %d: %q", waiting, want, r.Members, r.Bound, r.Answer)
	}
	// Raise the quota: Kueue admits the second; Lockstep places it whole.
	raiseQuota(t, ctx, h, ns, 8)
	harness.Eventually(t, ctx, waiting+" admitted and bound 4/4 after the quota is raised, "+admitted+" untouched", func(ctx context.Context) (bool, string, error) {
		s, p, b, err := state(ctx, waiting)
		if err != nil {
			return false, "", err
		}
		_, _, ba, err := state(ctx, admitted)
		return !s && b == 4 && ba == 4, fmt.Sprintf("%s suspended %v, %d pods, %d bound; %s %d bound", waiting, s, p, b, admitted, ba), err
	})
	for _, name := range []string{admitted, waiting} {
		h.NoLifecycleRestart(t, ctx, ns, name)
	}
}

// kueueAdmitsInTurn checks two jobs of 4 GPUs each (names, of resource res,
// each run as a JobSet of its name, in namespace ns whose queue has 4 GPUs
// of quota): Kueue admits one and Lockstep binds it whole in its group,
// the other stays suspended with no pods and `explain <alias>` says its
// JobSet is held; raising the quota to 8 admits the second, bound whole,
// the first untouched. Both groups are gangs of size, never restarted.
func kueueAdmitsInTurn(t *testing.T, ctx context.Context, h *harness.Harness, ns string, res schema.GroupVersionResource, alias, runsAs string, names [2]string, size int) {
	t.Helper()
	self := func(name string) func(string) string { return func(string) string { return name } }
	state := func(ctx context.Context, name string) (suspended bool, pods, bound int, grouped bool, err error) {
		u, err := h.Dynamic.Resource(res).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, 0, 0, false, err
		}
		suspended, _, _ = unstructured.NestedBool(u.Object, "spec", "suspend")
		pods, bound, grouped, err = jobSetPods(ctx, h, ns, name, self(name))
		return suspended, pods, bound, grouped, err
	}
	a, b := names[0], names[1]
	var admitted, waiting string
	harness.Eventually(t, ctx, fmt.Sprintf("Kueue admits one %s, Lockstep binds it %d/%d in its group; the other stays suspended with no pods", alias, size, size), func(ctx context.Context) (bool, string, error) {
		sa, pa, ba, ga, err := state(ctx, a)
		if err != nil {
			return false, "", err
		}
		sb, pb, bb, gb, err := state(ctx, b)
		if err != nil {
			return false, "", err
		}
		switch {
		case !sa && ba == size && ga && sb && pb == 0:
			admitted, waiting = a, b
		case !sb && bb == size && gb && sa && pa == 0:
			admitted, waiting = b, a
		}
		return admitted != "", fmt.Sprintf("%s suspended %v, %d pods, %d bound (grouped %v); %s suspended %v, %d pods, %d bound (grouped %v)", a, sa, pa, ba, ga, b, sb, pb, bb, gb), nil
	})
	r := h.Explain(t, ns, alias, waiting)
	if want := runsAs + " " + waiting + " is suspended"; r.Members != 0 || r.Bound != 0 || !strings.Contains(r.Answer, want) {
		t.Errorf("explain %s %s: want no members and %q, got members %d, bound %d: %q", alias, waiting, want, r.Members, r.Bound, r.Answer)
	}
	raiseQuota(t, ctx, h, ns, 8)
	harness.Eventually(t, ctx, fmt.Sprintf("%s admitted and bound %d/%d in its group after the quota is raised, %s untouched", waiting, size, size, admitted), func(ctx context.Context) (bool, string, error) {
		s, p, bw, g, err := state(ctx, waiting)
		if err != nil {
			return false, "", err
		}
		_, _, ba, _, err := state(ctx, admitted)
		return !s && bw == size && g && ba == size, fmt.Sprintf("%s suspended %v, %d pods, %d bound (grouped %v); %s %d bound", waiting, s, p, bw, g, admitted, ba), err
	})
	for _, name := range names {
		pg, err := h.PodGroup(ctx, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		if g := pg.Spec.SchedulingPolicy.Gang; g == nil || g.MinCount != int32(size) {
			t.Errorf("PodGroup %s: want one gang of minCount %d, got %+v", name, size, pg.Spec)
		}
		h.NoLifecycleRestart(t, ctx, ns, name)
	}
}

// Kueue in front of JobSets: the same split as for Jobs, each JobSet (two
// Jobs × 2 pods) one gang that Kueue admits whole or not at all.
func TestKueueAdmitsJobSetLockstepPlaces(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	kueueQueue(t, ctx, h, ns, 4)
	for _, name := range []string{"train-a", "train-b"} {
		js := builders.JobSet(ns, name, builders.ReplicatedJob("workers", 2, 2, extendedGPUPod()))
		js.Labels = map[string]string{"kueue.x-k8s.io/queue-name": "team"}
		createJobSet(t, ctx, h, js)
	}
	kueueAdmitsInTurn(t, ctx, h, ns, jobsets, "jobset", "JobSet", [2]string{"train-a", "train-b"}, 4)
}

// A Job queued in Kueue that asks both Kueue's topology-aware scheduling
// and Lockstep for a topology is admitted by the API server — with Kueue's
// own webhook in the chain — with Lockstep's warning naming both and the
// way to keep one.
func TestKueueTopologyBesideLockstepsIsWarned(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, time.Minute)
	kueueQueue(t, ctx, h, ns, 4)
	w := &harness.Warnings{}
	cfg := rest.CopyConfig(h.Config)
	cfg.WarningHandler = w
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	job := builders.IndexedJob(ns, "both", 4, extendedGPUPod())
	job.Labels = map[string]string{"kueue.x-k8s.io/queue-name": "team"}
	job.Annotations = map[string]string{lockv1.RequiredTopologyAnnotation: "topology.kubernetes.io/zone"}
	job.Spec.Template.Annotations = map[string]string{"kueue.x-k8s.io/podset-required-topology": "topology.kubernetes.io/zone"}
	if _, err := client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"spec.template.metadata.annotations[kueue.x-k8s.io/podset-required-topology]: Kueue's topology-aware scheduling",
		"and Lockstep's topology (scheduling.lockstep.dev/required-topology: topology.kubernetes.io/zone) both constrain this job, and Kueue's wins",
	} {
		if !strings.Contains(w.All(), want) {
			t.Errorf("warnings %q: want one containing %q", w.All(), want)
		}
	}
}
