package integrity

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestStoppedButSucceeded(t *testing.T) {
	pod := func(phase corev1.PodPhase, reason string, job bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train-1-abc", Annotations: map[string]string{batchv1.JobCompletionIndexAnnotation: "1"}}}
		if job {
			p.Labels = map[string]string{batchv1.JobNameLabel: "train"}
		}
		p.Status.Phase = phase
		if reason != "" {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: reason}}
		}
		return p
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		warn bool
	}{
		{"gang restart, exited 0", pod(corev1.PodSucceeded, PodReason, true), true},
		{"preempted, exited 0", pod(corev1.PodSucceeded, corev1.PodReasonPreemptionByScheduler, true), true},
		{"unhealthy device, exited 0", pod(corev1.PodSucceeded, PodReasonDeviceUnhealthy, true), true},
		{"gang restart, exited 143", pod(corev1.PodFailed, PodReason, true), false},
		{"finished on its own", pod(corev1.PodSucceeded, "", true), false},
		{"evicted by the kubelet, exited 0", pod(corev1.PodSucceeded, "TerminationByKubelet", true), false},
		{"not a Job's pod", pod(corev1.PodSucceeded, PodReason, false), false},
		{"still stopping", pod(corev1.PodRunning, PodReason, true), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := stoppedButSucceeded(tc.pod)
			if (msg != "") != tc.warn {
				t.Fatalf("warn %v, want %v (%q)", msg != "", tc.warn, msg)
			}
			if tc.warn && !(strings.Contains(msg, "Job train counts its index 1 as completed") && strings.Contains(msg, "exit non-zero")) {
				t.Errorf("message does not name the Job, the index and the remedy: %q", msg)
			}
		})
	}
}

func TestWarnedOncePerPod(t *testing.T) {
	var w warnedPods
	if !w.first("a") || w.first("a") || !w.first("b") {
		t.Error("want the first sight of each pod only")
	}
}
