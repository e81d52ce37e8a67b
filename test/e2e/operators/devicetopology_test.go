package operators

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	mpiv2 "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// clique is the attribute the cluster's GPUs carry (main_test.go).
const clique = "gpu.example.com/clique"

// onCPUPool pins a coordinator's pod spec to the CPU node, as users pin
// an MPI launcher or a Ray head away from their GPUs.
func onCPUPool(spec *corev1.PodSpec) {
	spec.NodeSelector = map[string]string{"pool": "cpu"}
	spec.Tolerations = append(spec.Tolerations, corev1.Toleration{Key: "example.com/cpu-pool", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
}

// placedInOneClique waits for the pods of selector to be bound — the
// coordinator (role) on the CPU node, every other pod on GPU nodes of one
// clique — and fails the test otherwise.
func placedInOneClique(t *testing.T, ctx context.Context, h *harness.Harness, ns, selector, roleLabel, coordinator string, n int) {
	t.Helper()
	harness.Eventually(t, ctx, fmt.Sprintf("%d pods of %s bound", n, selector), func(ctx context.Context) (bool, string, error) {
		pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, "", err
		}
		bound, state := 0, ""
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				bound++
			}
			state += fmt.Sprintf(" %s@%q", p.Name, p.Spec.NodeName)
		}
		return bound == n && len(pods.Items) == n, state, nil
	})
	pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	cliques := map[string]bool{}
	for _, p := range pods.Items {
		node := p.Spec.NodeName
		if p.Labels[roleLabel] == coordinator {
			if node != "cpu-0" {
				t.Errorf("%s (%s) on %s, want the CPU node", p.Name, coordinator, node)
			}
			continue
		}
		if !strings.HasPrefix(node, "worker-") {
			t.Fatalf("%s on %s, want a GPU node", p.Name, node)
		}
		// worker-0, -1: clique 0; worker-2, -3: clique 1.
		cliques[fmt.Sprint((node[len(node)-1]-'0')/2)] = true
	}
	if len(cliques) != 1 {
		t.Errorf("GPU pods span cliques %v, want one", cliques)
	}
}

// An MPIJob asking that its GPUs share a clique, whose launcher (no GPU)
// is pinned to the CPU node: the launcher holds no device, so the
// attribute does not keep it off the CPU node; the gang (launcher and 2
// workers × 2 GPUs, one clique's 4 GPUs) binds whole.
func TestMPIJobDeviceTopologyKeepsItsCPULauncher(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	gpuTemplates(t, ctx, h, ns)
	job := mpiJob(ns, "nvl", mpiv2.LauncherCreationPolicyAtStartup)
	job.Annotations = map[string]string{lockv1.DeviceTopologyAnnotation: clique}
	job.Spec.MPIReplicaSpecs[mpiv2.MPIReplicaTypeWorker].Replicas = ptr.To[int32](2)
	onCPUPool(&job.Spec.MPIReplicaSpecs[mpiv2.MPIReplicaTypeLauncher].Template.Spec)
	create(t, ctx, h, mpiJobs, job)
	placedInOneClique(t, ctx, h, ns, mpiv2.JobNameLabel+"=nvl", mpiv2.JobRoleLabel, "launcher", 3)
}

// A RayCluster asking that its GPUs share a clique, its head (no GPU)
// pinned to the CPU node and its GPU workers elastic (minReplicas 0): a
// scheduling tree whose children inherit the attribute; the head's child
// is placed on the CPU node with the workers in one clique.
func TestRayClusterDeviceTopologyKeepsItsCPUHead(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	gpuTemplates(t, ctx, h, ns)
	spec := rayCluster()
	onCPUPool(&spec.HeadGroupSpec.Template.Spec)
	spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](2)
	spec.WorkerGroupSpecs[0].MinReplicas = ptr.To[int32](0)
	spec.WorkerGroupSpecs[0].MaxReplicas = ptr.To[int32](2)
	create(t, ctx, h, rayClusters, &rayv1.RayCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: rayv1.GroupVersion.String(), Kind: "RayCluster"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nvl", Annotations: map[string]string{lockv1.DeviceTopologyAnnotation: clique}},
		Spec:       spec,
	})
	placedInOneClique(t, ctx, h, ns, "ray.io/cluster=nvl", "ray.io/node-type", string(rayv1.HeadNode), 3)
	treeScheduled(t, ctx, h, ns, "nvl")
}
