package integrations

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// checkedQueue is kueueQueue whose ClusterQueue names Lockstep's placement
// check (the AdmissionCheck the harness creates with Kueue, as `dev up
// --integrations kueue` does), once Lockstep has marked it Active.
func checkedQueue(t testing.TB, ctx context.Context, h *harness.Harness, ns string, gpus int) {
	t.Helper()
	harness.Eventually(t, ctx, "Lockstep marks AdmissionCheck "+devcluster.KueuePlacementCheck+" Active", func(ctx context.Context) (bool, string, error) {
		ac, err := h.Dynamic.Resource(kueue.WithResource("admissionchecks")).Get(ctx, devcluster.KueuePlacementCheck, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return conditionTrue(ac, "Active"), fmt.Sprint(ac.Object["status"]), nil
	})
	kueueQueueSpec(t, ctx, h, ns, clusterQueue(ns, ns, gpus)+
		"  admissionChecksStrategy:\n    admissionChecks:\n    - name: "+devcluster.KueuePlacementCheck+"\n")
}

func conditionTrue(u *unstructured.Unstructured, typ string) bool {
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, r := range raw {
		var c metav1.Condition
		if m, ok := r.(map[string]any); ok && runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c) == nil && c.Type == typ {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

// workloadOf is the Kueue Workload of Job name (nil until Kueue made it).
func workloadOf(ctx context.Context, h *harness.Harness, ns, job string) (*unstructured.Unstructured, error) {
	list, err := h.Dynamic.Resource(kueue.WithResource("workloads")).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		if o := metav1.GetControllerOf(&list.Items[i]); o != nil && o.Kind == "Job" && o.Name == job {
			return &list.Items[i], nil
		}
	}
	return nil, nil
}

// placementCheck is a Workload's Lockstep check: state, message and the
// node selector it pins its first pod set to.
func placementCheck(wl *unstructured.Unstructured) (state, message string, pin map[string]string) {
	checks, _, _ := unstructured.NestedSlice(wl.Object, "status", "admissionChecks")
	for _, c := range checks {
		m, _ := c.(map[string]any)
		if m["name"] != devcluster.KueuePlacementCheck {
			continue
		}
		state, _ = m["state"].(string)
		message, _ = m["message"].(string)
		if ups, ok := m["podSetUpdates"].([]any); ok && len(ups) > 0 {
			pin, _, _ = unstructured.NestedStringMap(ups[0].(map[string]any), "nodeSelector")
		}
	}
	return state, message, pin
}

// gpuBlocker is a lone Lockstep pod taking one GPU on node.
func gpuBlocker(t testing.TB, ctx context.Context, h *harness.Harness, ns, name, node string) {
	t.Helper()
	p := extendedGPUPod()
	p.Name, p.Namespace = name, ns
	p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	if _, err := h.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createQueuedJob creates a Job of ranks single-GPU pods in LocalQueue
// team, with annotations and more labels (e.g. a Kueue priority class).
func createQueuedJob(t testing.TB, ctx context.Context, h *harness.Harness, ns, name string, ranks int32, annotations, labels map[string]string) {
	t.Helper()
	job := builders.IndexedJob(ns, name, ranks, extendedGPUPod())
	job.Labels = map[string]string{"kueue.x-k8s.io/queue-name": "team"}
	maps.Copy(job.Labels, labels)
	job.Annotations = annotations
	if _, err := h.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// jobPods are a Job's pods and the nodes of those bound.
func jobPods(ctx context.Context, h *harness.Harness, ns, job string) (pods []corev1.Pod, nodes []string, err error) {
	list, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job})
	if err != nil {
		return nil, nil, err
	}
	for _, p := range list.Items {
		if p.Spec.NodeName != "" {
			nodes = append(nodes, p.Spec.NodeName)
		}
	}
	return list.Items, nodes, nil
}

// The fragmented-cluster story of docs/integrations.md: two racks of 4 GPUs
// with one GPU taken in each, a ClusterQueue with quota for one 4-GPU gang at
// a time. A rack-bound 4-rank Job queued first cannot be placed; without
// Lockstep's check Kueue admits it on quota, it holds the quota and binds
// nothing, and a 4-rank Job that fits waits behind it. With the check the
// first is retried holding no quota (its check saying why, in explain's
// words) and the second is admitted and bound whole; once room appears the
// first is admitted pinned to the rack its check chose, and bound there.
func TestKueueAdmitsOnlyWhatLockstepCanPlace(t *testing.T) {
	h := harness.Get(t)
	ctx := harness.Context(t, 8*time.Minute)
	rackRequired := map[string]string{lockv1.RequiredTopologyAnnotation: rackLabel}

	// Free GPUs fragmented: 3 in each rack.
	holders := h.Namespace(t)
	h.CreateDeviceClass(ctx, t, builders.ExtendedResourceClass("gpu-extended-"+holders, "gpu.example.com", string(extendedGPU)))
	gpuBlocker(t, ctx, h, holders, "hold-0", "worker-0")
	gpuBlocker(t, ctx, h, holders, "hold-2", "worker-2")
	harness.Eventually(t, ctx, "one GPU taken in each rack", func(ctx context.Context) (bool, string, error) {
		list, err := h.Client.CoreV1().Pods(holders).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		bound := 0
		for _, p := range list.Items {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return bound == 2, fmt.Sprintf("%d of 2 bound", bound), nil
	})

	t.Run("without the check", func(t *testing.T) {
		ns := h.Namespace(t)
		kueueQueue(t, ctx, h, ns, 4)
		createQueuedJob(t, ctx, h, ns, "rack-bound", 4, rackRequired, nil)
		harness.Eventually(t, ctx, "Kueue admits the rack-bound Job on quota alone", func(ctx context.Context) (bool, string, error) {
			wl, err := workloadOf(ctx, h, ns, "rack-bound")
			if err != nil || wl == nil {
				return false, "no workload yet", err
			}
			return conditionTrue(wl, "Admitted"), fmt.Sprint(wl.Object["status"]), nil
		})
		createQueuedJob(t, ctx, h, ns, "fits", 4, nil, nil)
		// The fitting Job waits behind the held quota; the admitted one
		// binds nothing (20 s: Kueue schedules in well under a second).
		for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Second) {
			wl, err := workloadOf(ctx, h, ns, "fits")
			if err != nil {
				t.Fatal(err)
			}
			if wl != nil && conditionTrue(wl, "QuotaReserved") {
				t.Fatalf("without the check the fitting Job got quota while the rack-bound one held it: %v", wl.Object["status"])
			}
			if _, nodes, err := jobPods(ctx, h, ns, "rack-bound"); err != nil || len(nodes) > 0 {
				t.Fatalf("the rack-bound Job bound %v (err %v): it cannot fit in one rack", nodes, err)
			}
		}
		for _, j := range []string{"rack-bound", "fits"} {
			if err := h.Client.BatchV1().Jobs(ns).Delete(ctx, j, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
				t.Fatal(err)
			}
		}
	})

	ns := h.Namespace(t)
	checkedQueue(t, ctx, h, ns, 4)
	createQueuedJob(t, ctx, h, ns, "rack-bound", 4, rackRequired, nil)
	var retried string
	harness.Eventually(t, ctx, "the rack-bound Job's placement check is Retry, holding no quota", func(ctx context.Context) (bool, string, error) {
		wl, err := workloadOf(ctx, h, ns, "rack-bound")
		if err != nil || wl == nil {
			return false, "no workload yet", err
		}
		state, msg, _ := placementCheck(wl)
		if state == "Retry" || strings.Contains(msg, "Previously: Retry") {
			retried = msg
		}
		return retried != "" && !conditionTrue(wl, "Admitted"), fmt.Sprintf("check %s %q; status %v", state, msg, wl.Object["status"]), nil
	})
	createQueuedJob(t, ctx, h, ns, "fits", 4, nil, nil)
	created := time.Now()
	harness.Eventually(t, ctx, "the fitting Job is admitted and bound 4/4 while the rack-bound one holds nothing", func(ctx context.Context) (bool, string, error) {
		_, nodes, err := jobPods(ctx, h, ns, "fits")
		if err != nil {
			return false, "", err
		}
		pods, held, err := jobPods(ctx, h, ns, "rack-bound")
		if err != nil {
			return false, "", err
		}
		if len(pods) > 0 {
			return false, "", fmt.Errorf("the rack-bound Job has %d pods (%v bound): it was admitted though it cannot be placed", len(pods), held)
		}
		return len(nodes) == 4, fmt.Sprintf("fits: %d of 4 bound", len(nodes)), nil
	})
	// Kueue resets a retried check to Pending; the answer's words stay in
	// an event on the Workload.
	wl, err := workloadOf(ctx, h, ns, "rack-bound")
	if err != nil {
		t.Fatal(err)
	}
	evs, err := h.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + wl.GetName() + ",reason=PlacementCheckRetry"})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) == 0 || !strings.Contains(evs.Items[0].Message, "example.com/rack") {
		t.Errorf("want a PlacementCheckRetry event on Workload %s naming the rack it cannot get, got %v (check message seen: %q)", wl.GetName(), evs.Items, retried)
	}
	t.Logf("the fitting Job was bound %s after its creation; the rack-bound Job's check was retried %d times by then", time.Since(created).Round(100*time.Millisecond), retries(wl))

	// Room appears: the blockers and the fitting Job go.
	for _, p := range []string{"hold-0", "hold-2"} {
		if err := h.Client.CoreV1().Pods(holders).Delete(ctx, p, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Client.BatchV1().Jobs(ns).Delete(ctx, "fits", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	var pin map[string]string
	harness.Eventually(t, ctx, "the rack-bound Job is admitted, pinned to one rack, and bound 4/4 there", func(ctx context.Context) (bool, string, error) {
		wl, err := workloadOf(ctx, h, ns, "rack-bound")
		if err != nil || wl == nil {
			return false, "", err
		}
		var state, msg string
		state, msg, pin = placementCheck(wl)
		_, nodes, err := jobPods(ctx, h, ns, "rack-bound")
		if err != nil {
			return false, "", err
		}
		return state == "Ready" && conditionTrue(wl, "Admitted") && len(nodes) == 4, fmt.Sprintf("check %s %q pin %v; %d of 4 bound", state, msg, pin, len(nodes)), nil
	})
	if pin[rackLabel] == "" {
		t.Fatalf("the Ready check pins %v: want a node selector on %s", pin, rackLabel)
	}
	pods, _, err := jobPods(ctx, h, ns, "rack-bound")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		node, err := h.Client.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := node.Labels[rackLabel]; got != pin[rackLabel] || p.Spec.NodeSelector[rackLabel] != pin[rackLabel] {
			t.Errorf("pod %s on %s (%s=%s, selector %v): want it in the rack its check chose, %s", p.Name, p.Spec.NodeName, rackLabel, got, p.Spec.NodeSelector, pin[rackLabel])
		}
	}
	if wl, err = workloadOf(ctx, h, ns, "rack-bound"); err == nil {
		t.Logf("the rack-bound Job's check was retried %d times in all", retries(wl))
	}
	h.NoLifecycleRestart(t, ctx, ns, "rack-bound")
}

// retries is Kueue's retry count of a Workload's Lockstep check.
func retries(wl *unstructured.Unstructured) int64 {
	checks, _, _ := unstructured.NestedSlice(wl.Object, "status", "admissionChecks")
	for _, c := range checks {
		if m, _ := c.(map[string]any); m["name"] == devcluster.KueuePlacementCheck {
			n, _, _ := unstructured.NestedInt64(m, "retryCount")
			return n
		}
	}
	return 0
}
