package integrity

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/integrity"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

func someRank(ranks map[types.UID]string) types.UID {
	for uid := range ranks {
		return uid
	}
	return ""
}

// events are "Reason: message" of the events about an object.
func events(ctx context.Context, h *harness.Harness, ns, name string) []string {
	list, err := h.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Reason+": "+e.Message)
	}
	return out
}

func hasEvent(evs []string, reason, substr string) bool {
	for _, e := range evs {
		if strings.HasPrefix(e, reason+": ") && strings.Contains(e, substr) {
			return true
		}
	}
	return false
}

// TestUnhealthyDeviceRestartsWholeGang: a rank whose kubelet reports its
// GPU Unhealthy ends the incarnation (DeviceUnhealthy, naming the device,
// on the PodGroup once the pods are gone), its pod and group get an event
// naming the device, and the gang runs again whole without consuming the
// Job's backoffLimit.
func TestUnhealthyDeviceRestartsWholeGang(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	before := gangJob(t, ctx, h, ns, perIndexBackoff)
	pod, device := h.ReportDeviceHealth(t, ctx, ns, someRank(before), corev1.ResourceHealthStatusUnhealthy)
	harness.Eventually(t, ctx, "the whole gang restarted", func(ctx context.Context) (bool, string, error) {
		now := runningPods(ctx, h, ns)
		for uid := range now {
			if _, old := before[uid]; old {
				return false, "an original rank still runs", nil
			}
		}
		return len(now) == 4, fmt.Sprintf("%d new ranks running", len(now)), nil
	})
	pg, err := h.PodGroup(ctx, ns, "train")
	if err != nil {
		t.Fatal(err)
	}
	inc := pg.Status.Incarnation
	if inc == nil || inc.Number != 2 {
		t.Fatalf("want incarnation 2 running, got %+v", inc)
	}
	if !hasEvent(events(ctx, h, ns, pod), integrity.ReasonDeviceUnhealthy, device) {
		t.Errorf("pod %s: want a DeviceUnhealthy event naming %s, got %v", pod, device, events(ctx, h, ns, pod))
	}
	evs := events(ctx, h, ns, "train")
	if !hasEvent(evs, integrity.ReasonDeviceUnhealthy, device) || !hasEvent(evs, "GangRestart", device) {
		t.Errorf("PodGroup: want DeviceUnhealthy and GangRestart events naming %s, got %v", device, evs)
	}
	job, err := h.Client.BatchV1().Jobs(ns).Get(ctx, "train", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, jc := range job.Status.Conditions {
		if jc.Type == batchv1.JobFailed && jc.Status == corev1.ConditionTrue {
			t.Errorf("the gang restart failed the Job: %s", jc.Message)
		}
	}
	// The evidence outlives the pods: explain says why the gang was last
	// taken down, naming the device.
	r := h.Explain(t, ns, "podgroup", "train")
	if c := r.LastRestart; c == nil || c.Reason != integrity.ReasonDeviceUnhealthy || !strings.Contains(c.Message, device) || !strings.Contains(c.Message, "Unhealthy") {
		t.Errorf("explain: want the last restart naming %s Unhealthy, got %+v", device, c)
	}
}

// TestUnknownDeviceHealthKeepsGangRunning: Healthy reports and an Unknown
// one (a driver that missed a health update) restart nothing, and explain
// shows the device's health.
func TestUnknownDeviceHealthKeepsGangRunning(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	before := gangJob(t, ctx, h, ns)
	var unknown types.UID
	for uid := range before {
		if unknown == "" {
			unknown = uid
			continue
		}
		h.ReportDeviceHealth(t, ctx, ns, uid, corev1.ResourceHealthStatusHealthy)
	}
	pod, device := h.ReportDeviceHealth(t, ctx, ns, unknown, corev1.ResourceHealthStatusUnknown)
	time.Sleep(8 * time.Second)
	now := runningPods(ctx, h, ns)
	if len(now) != 4 {
		t.Fatalf("want the gang still running, got %d ranks", len(now))
	}
	for uid := range now {
		if _, ok := before[uid]; !ok {
			t.Errorf("device health Healthy/Unknown restarted rank %s", uid)
		}
	}
	r := h.Explain(t, ns, "podgroup", "train")
	want := []dra.DeviceHealth{{Pod: pod, Resource: "claim:gpu", Device: device, Health: corev1.ResourceHealthStatusUnknown}}
	if fmt.Sprint(want) != fmt.Sprint(r.DeviceHealth) || r.HealthyDevices != 3 {
		t.Errorf("explain device health: want %v and 3 Healthy, got %v and %d", want, r.DeviceHealth, r.HealthyDevices)
	}
}

// TestUnhealthyDeviceSingleModeTakesDownThatMemberAlone: with
// disruptionMode single the member on the Unhealthy device is taken down
// alone (its Job recreates it); the other ranks keep running.
func TestUnhealthyDeviceSingleModeTakesDownThatMemberAlone(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	before := gangJob(t, ctx, h, ns, perIndexBackoff, func(j *batchv1.Job) {
		j.Annotations = map[string]string{jobintegration.DisruptionModeAnnotation: "single"}
	})
	sick := someRank(before)
	pod, device := h.ReportDeviceHealth(t, ctx, ns, sick, corev1.ResourceHealthStatusUnhealthy)
	harness.Eventually(t, ctx, "the member replaced, the others untouched", func(ctx context.Context) (bool, string, error) {
		now := runningPods(ctx, h, ns)
		if _, ok := now[sick]; ok {
			return false, "the member on the Unhealthy device still runs", nil
		}
		for uid := range before {
			if _, ok := now[uid]; uid != sick && !ok {
				return false, "", fmt.Errorf("rank %s on a healthy device was taken down", uid)
			}
		}
		return len(now) == 4, fmt.Sprintf("%d running", len(now)), nil
	})
	if !hasEvent(events(ctx, h, ns, pod), integrity.ReasonDeviceUnhealthy, device) {
		t.Errorf("pod %s: want a DeviceUnhealthy event naming %s, got %v", pod, device, events(ctx, h, ns, pod))
	}
	pg, err := h.PodGroup(ctx, ns, "train")
	if err != nil {
		t.Fatal(err)
	}
	if inc := pg.Status.Incarnation; inc == nil || inc.Number != 1 || inc.Ended != nil {
		t.Errorf("disruptionMode single: want incarnation 1 still running, got %+v", inc)
	}
}
