package topology

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-dev/lockstep/internal/explain"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// rackJob is an Indexed Job of n one-GPU ranks required in one rack, as a
// user writes it: no namespace (explain -f and the API server take -n's).
func rackJob(name string, n int) string {
	return fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata:
  name: %s
  annotations: {scheduling.lockstep.dev/required-topology: %s}
spec:
  completionMode: Indexed
  parallelism: %d
  completions: %d
  template:
    spec:
      restartPolicy: Never
      schedulerName: lockstep
      resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
      containers:
      - name: rank
        image: train
        resources: {requests: {cpu: "1"}, claims: [{name: gpu}]}
`, name, rack, n, n)
}

// whatIf runs `lockstep explain -f - -o json` on the manifest.
func whatIf(t *testing.T, h *harness.Harness, ns, manifest string) *explain.WhatIfReport {
	t.Helper()
	cmd := exec.Command(filepath.Join(h.BinDir, "lockstep"), "explain", "-f", "-", "-n", ns, "--kubeconfig", h.Kubeconfig, "-o", "json")
	cmd.Stdin = strings.NewReader(manifest)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("lockstep explain -f: %v\n%s", err, stderr.String())
	}
	var r explain.WhatIfReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("decoding explain -f -o json: %v\n%s", err, out)
	}
	t.Logf("explain -f: %s", r.Answer)
	return &r
}

// TestWhatIfAgreesWithTheScheduler: with a rack gang of 6 in one rack (2 of
// its 8 GPUs left), `explain -f` answers for a 4-rank rack Job not yet
// created that it fits, in a rack other than the busy one, creating
// nothing; for a 9-rank one that it fits no rack. Created, the 4-rank Job
// is bound whole in the very rack the what-if named.
func TestWhatIfAgreesWithTheScheduler(t *testing.T) {
	h, ns, ctx := sixInOneRack(t)
	busy, _ := racksOf(t, ctx, h, ns, "six")

	r := whatIf(t, h, ns, rackJob("train", 4))
	if r.Verdict != explain.Fits || len(r.Units) != 1 || r.Units[0].Placeable != 4 || len(r.Units[0].Where) != 1 {
		t.Fatalf("what-if of a 4-rank rack Job: %s, units %+v; want Fits, 4 placeable in one rack", r.Verdict, r.Units)
	}
	where := r.Units[0].Where[0]
	if _, isBusy := busy[strings.TrimPrefix(where, rack+"=")]; isBusy || !strings.HasPrefix(where, rack+"=") {
		t.Errorf("what-if places the Job in %s; want a rack other than the busy %v", where, busy)
	}
	if _, err := h.Client.BatchV1().Jobs(ns).Get(ctx, "train", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("explain -f created the Job (get: %v)", err)
	}
	if _, err := h.PodGroup(ctx, ns, "train"); !apierrors.IsNotFound(err) {
		t.Errorf("explain -f created a PodGroup (get: %v)", err)
	}

	if r := whatIf(t, h, ns, rackJob("big", 9)); r.Verdict != explain.DoesNotFit || !strings.Contains(r.Answer, "not satisfiable") {
		t.Errorf("what-if of a 9-rank rack Job: %s %q; want DoesNotFit, not satisfiable in any rack", r.Verdict, r.Answer)
	}

	job := &batchv1.Job{}
	if err := yaml.UnmarshalStrict([]byte(rackJob("train", 4)), job); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, ctx, "the Job's 4 pods bound", func(ctx context.Context) (bool, string, error) {
		list, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=train"})
		if err != nil {
			return false, "", err
		}
		racks := map[string]int{}
		for _, p := range list.Items {
			if p.Spec.NodeName == "" {
				continue
			}
			n, err := h.Client.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			racks[rack+"="+n.Labels[rack]]++
		}
		if racks[where] == 4 {
			return true, "", nil
		}
		if len(racks) > 0 && racks[where] == 0 {
			return false, "", fmt.Errorf("the scheduler bound the Job in %v; the what-if said %s", racks, where)
		}
		return false, fmt.Sprintf("bound per rack %v", racks), nil
	})
}
