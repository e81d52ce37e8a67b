package integrations

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

var trainerAPI = schema.GroupVersion{Group: "trainer.kubeflow.org", Version: "v1alpha1"}

// torchRuntime is a namespaced TrainingRuntime like Trainer's own
// torch-distributed, its nodes' pods scheduled by Lockstep, each taking
// gpu (a claim from the one-gpu template, or example.com/gpu: 1).
func torchRuntime(ns, gpu string) string {
	res := `resources:
                    requests: {cpu: "1", example.com/gpu: "1"}
                    limits: {example.com/gpu: "1"}`
	claims := ""
	if gpu == "claim" {
		res = `resources:
                    requests: {cpu: "1"}
                    claims: [{name: gpu}]`
		claims = `
                resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]`
	}
	return fmt.Sprintf(`apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainingRuntime
metadata: {name: torch-lockstep, namespace: %s}
spec:
  mlPolicy:
    numNodes: 1
    torch: {}
  template:
    spec:
      replicatedJobs:
      - name: node
        template:
          metadata:
            labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}
          spec:
            template:
              spec:
                schedulerName: %s%s
                containers:
                - name: node
                  image: registry.example/torch:v1
                  %s
`, ns, lockv1.SchedulerName, claims, res)
}

func trainJob(ns, name string, nodes int, labels map[string]string) string {
	l, _ := json.Marshal(labels) // a flow mapping: YAML
	return fmt.Sprintf(`apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: %s
  namespace: %s
  labels: %s
spec:
  runtimeRef: {name: torch-lockstep, apiGroup: trainer.kubeflow.org, kind: TrainingRuntime}
  trainer: {numNodes: %d}
`, name, ns, l, nodes)
}

func applyTrainer(t *testing.T, ctx context.Context, h *harness.Harness, resource, manifest string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Dynamic.Resource(trainerAPI.WithResource(resource)).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating %s %s: %v", resource, u.GetName(), err)
	}
}

// Two TrainJobs (Kubeflow Trainer v2, its real controller) that together
// need more GPUs than exist (5 + 5 of 8), Lockstep named only in their
// runtime's pod template: each runs as a JobSet that is one gang; one runs
// whole, the other holds nothing and `lockstep explain trainjob` says why;
// deleting the first lets the second run.
func TestTrainJobsAreGangs(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	h.OneGPUTemplate(ctx, t, ns)
	applyTrainer(t, ctx, h, "trainingruntimes", torchRuntime(ns, "claim"))
	for _, name := range []string{"llama-a", "llama-b"} {
		applyTrainer(t, ctx, h, "trainjobs", trainJob(ns, name, 5, nil))
	}
	oneWholeThenOther(t, ctx, h, ns, trainerAPI.WithResource("trainjobs"), "trainjob", [2]string{"llama-a", "llama-b"}, 5, nil)
}

// Kueue in front of Trainer: a ClusterQueue with 4 GPUs of quota and two
// 4-node TrainJobs → Kueue admits one (Trainer then re-applies its JobSet
// resumed, with Kueue's changes), Lockstep binds it whole; the other stays
// suspended and holds nothing; raising the quota admits the second, which
// Lockstep binds whole.
func TestKueueAdmitsTrainJobLockstepPlaces(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	kueueQueue(t, ctx, h, ns, 4)
	applyTrainer(t, ctx, h, "trainingruntimes", torchRuntime(ns, "extended"))
	for _, name := range []string{"llama-a", "llama-b"} {
		applyTrainer(t, ctx, h, "trainjobs", trainJob(ns, name, 4, map[string]string{"kueue.x-k8s.io/queue-name": "team"}))
	}
	kueueAdmitsInTurn(t, ctx, h, ns, trainerAPI.WithResource("trainjobs"), "trainjob", "JobSet", [2]string{"llama-a", "llama-b"}, 4)
	// Exactly one JobSet each: Trainer runs a TrainJob as one JobSet, and
	// Lockstep made no group of its own for anything else.
	list, err := h.Dynamic.Resource(jobsets).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 {
		t.Errorf("want 2 JobSets (one per TrainJob), got %d", len(list.Items))
	}
}

// A gang restart costs a TrainJob nothing when its runtime's pods restart
// Never (issue 38; Trainer's own runtimes set no restartPolicy, so JobSet
// defaults OnFailure and each restart spends a child Job's backoffLimit):
// its JobSet's child Jobs are given the rule that ignores disruptions, one
// GPU reported Unhealthy restarts the gang whole, and it runs again whole
// with no JobSet restart and the TrainJob not failed.
func TestTrainJobGangRestartCostsNothing(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 4*time.Minute)
	h.OneGPUTemplate(ctx, t, ns)
	never := strings.Replace(torchRuntime(ns, "claim"), "schedulerName: "+lockv1.SchedulerName, "restartPolicy: Never\n                schedulerName: "+lockv1.SchedulerName, 1)
	applyTrainer(t, ctx, h, "trainingruntimes", never)
	applyTrainer(t, ctx, h, "trainjobs", trainJob(ns, "llama", 3, nil))
	t.Logf("the TrainJob ran again whole %s after the restart", h.RestartOnUnhealthyDevice(t, ctx, ns, "llama", 3).Round(100*time.Millisecond))
	js, err := getJobSet(ctx, h, ns, "llama")
	if err != nil {
		t.Fatal(err)
	}
	if js.Status.Restarts != 0 {
		t.Errorf("the gang restart cost the TrainJob's JobSet %d restarts", js.Status.Restarts)
	}
	tj, err := h.Dynamic.Resource(trainerAPI.WithResource("trainjobs")).Namespace(ns).Get(ctx, "llama", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conds, _, _ := unstructured.NestedSlice(tj.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Failed" && m["status"] == "True" {
			t.Errorf("the gang restart failed the TrainJob: %v", m["message"])
		}
	}
}
