package realnode

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/lockstep-dev/lockstep/internal/devcluster/gpudriver"
	"github.com/lockstep-dev/lockstep/internal/integrity"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// TestGangRunsWholeOnRealContainers: a 2-rank gang binds whole on the real
// nodes, both containers start and each sees exactly the device its claim
// was allocated, as prepared by its node's driver; when the Job goes, the
// processes stop and the driver unprepares every claim.
func TestGangRunsWholeOnRealContainers(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	rankJob(t, ctx, h, ns, "train", 2, 1)
	ranks := waitRanks(t, ctx, h, ns, "train", 2, nil)
	assertSawItsDevices(t, ctx, h, ns, ranks)
	for _, r := range ranks {
		if len(rankProcesses(r.Pod)) == 0 {
			t.Errorf("rank %s runs on %s but no process of it runs on this machine", r.Pod, r.Node)
		}
	}

	if err := h.Client.BatchV1().Jobs(ns).Delete(ctx, "train", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	waitNoProcesses(t, ctx, "the ranks' processes gone with the Job", podNames(ranks))
	harness.Eventually(t, ctx, "every claim of the namespace unprepared", func(context.Context) (bool, string, error) {
		for _, node := range h.Cluster.RealNodes() {
			if p := preparedFor(t, h, node, ns); len(p) > 0 {
				return false, fmt.Sprintf("%s still has %v prepared", node, p), nil
			}
		}
		return true, "", nil
	})
}

// TestGangThatCannotFitPreparesNothing: a gang needing more GPUs than the
// real nodes have (3 ranks × 2 of 4) binds no member, so no claim is
// allocated, no driver prepares a device and no container starts, while
// Lockstep says why.
func TestGangThatCannotFitPreparesNothing(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 2*time.Minute)
	rankJob(t, ctx, h, ns, "too-big", 3, gpusPerNode)
	harness.Eventually(t, ctx, "Lockstep to say the gang does not fit", func(ctx context.Context) (bool, string, error) {
		c, err := h.ScheduledCondition(ctx, ns, "too-big")
		if err != nil || c == nil {
			return false, fmt.Sprintf("no condition yet (%v)", err), nil
		}
		return c.Status == metav1.ConditionFalse, c.Reason + ": " + c.Message, nil
	})
	time.Sleep(settle)
	pods, err := h.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 3 {
		t.Errorf("want the gang's 3 pods pending, got %d pods", len(pods.Items))
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			t.Errorf("pod %s of a gang that cannot fit was bound to %s", p.Name, p.Spec.NodeName)
		}
		if pids := rankProcesses(p.Name); len(pids) > 0 {
			t.Errorf("pod %s of a gang that cannot fit runs as pids %v", p.Name, pids)
		}
	}
	claims, err := h.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claims.Items {
		if c.Status.Allocation != nil {
			t.Errorf("claim %s of a gang that cannot fit holds devices %+v", c.Name, c.Status.Allocation.Devices.Results)
		}
	}
	for _, node := range h.Cluster.RealNodes() {
		if p := preparedFor(t, h, node, ns); len(p) > 0 {
			t.Errorf("the driver of %s prepared %v for a gang that cannot fit", node, p)
		}
	}
}

// TestPreemptionStopsTheVictimsContainers: an urgent gang preempts a
// low-priority gang holding every real GPU; the victim's rank processes are
// stopped and the preemptor's ranks start on the freed devices, each seeing
// its own.
func TestPreemptionStopsTheVictimsContainers(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	for _, pc := range []*schedulingv1.PriorityClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "realnode-low"}, Value: 100},
		{ObjectMeta: metav1.ObjectMeta{Name: "realnode-urgent"}, Value: 10000},
	} {
		if _, err := h.Client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	rankJob(t, ctx, h, ns, "research", realNodes, gpusPerNode, priority("realnode-low"), perIndexBackoff)
	victims := waitRanks(t, ctx, h, ns, "research", realNodes, nil)
	freed := map[string]bool{}
	for _, r := range victims {
		if len(rankProcesses(r.Pod)) == 0 {
			t.Fatalf("victim rank %s has no process running", r.Pod)
		}
		for _, d := range r.Devices {
			freed[r.Node+"/"+d] = true
		}
	}

	rankJob(t, ctx, h, ns, "urgent", realNodes, gpusPerNode, priority("realnode-urgent"))
	waitNoProcesses(t, ctx, "the victim's rank processes stopped", podNames(victims))
	preemptors := waitRanks(t, ctx, h, ns, "urgent", realNodes, nil)
	assertSawItsDevices(t, ctx, h, ns, preemptors)
	for _, r := range preemptors {
		for _, d := range r.Devices {
			if !freed[r.Node+"/"+d] {
				t.Errorf("preemptor rank %s got %s/%s, which the victim did not hold", r.Pod, r.Node, d)
			}
		}
	}
	// The victim's ranks were stopped, not finished: its Job counts nothing
	// and waits to run again.
	assertJobCountedNothing(t, ctx, h, ns, "research", 0)
}

// TestCrashedRankRestartsTheGangWhole: one rank's process exits 3 on its
// own; the gang is restarted whole as its second incarnation, every rank a
// new container with a new process, and the Job goes on.
func TestCrashedRankRestartsTheGangWhole(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	rankJob(t, ctx, h, ns, "train", 2, 1, perIndexBackoff)
	before := waitRanks(t, ctx, h, ns, "train", 2, nil)
	harness.Eventually(t, ctx, "incarnation 1", func(ctx context.Context) (bool, string, error) {
		n, err := incarnation(ctx, h, ns, "train")
		return n == 1, fmt.Sprintf("incarnation %d", n), err
	})
	crash := before[firstUID(before)]
	exitRank(t, ctx, crash, 3)

	after, st := restartedWhole(t, ctx, h, ns, before)
	if !slices.ContainsFunc(st.Restarts, func(m string) bool { return strings.Contains(m, crash.Pod) }) {
		t.Errorf("want a GangRestart event naming the crashed rank %s, got %v", crash.Pod, st.Restarts)
	}
	for _, r := range after {
		if len(rankProcesses(r.Pod)) == 0 {
			t.Errorf("rank %s of the second incarnation has no process", r.Pod)
		}
	}
	assertSawItsDevices(t, ctx, h, ns, after)
	// The crash is the rank's own failure (one of its index's retries); the
	// rank Lockstep stopped to restart the gang counts nothing.
	assertJobCountedNothing(t, ctx, h, ns, "train", 1)
}

// TestUnhealthyDeviceRestartsTheGangThroughTheKubelet: the driver reports a
// running rank's GPU unhealthy through the kubelet's DRA health service; the
// real kubelet writes it into the pod's allocatedResourcesStatus, Lockstep
// restarts the gang whole (reason DeviceUnhealthy, the driver's message in
// the event), and the driver's taint keeps the new incarnation off that GPU.
func TestUnhealthyDeviceRestartsTheGangThroughTheKubelet(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	rankJob(t, ctx, h, ns, "train", 2, 1, perIndexBackoff)
	before := waitRanks(t, ctx, h, ns, "train", 2, nil)
	sick := before[firstUID(before)]
	device := sick.Devices[0]
	unhealthy := filepath.Join(h.Cluster.DriverStateDir(sick.Node), gpudriver.UnhealthyFile)
	if err := os.WriteFile(unhealthy, []byte(device+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(unhealthy) })

	after, st := restartedWhole(t, ctx, h, ns, before)
	// The restart names the device as the kubelet reported it in the pod's
	// allocatedResourcesStatus: its ResourceID (the CDI device ID the driver
	// prepared it with), Unhealthy, and the driver's own message, which only
	// the kubelet's health stream carries.
	resourceID := gpudriver.DefaultDriver + "/gpu=" + device
	if !slices.ContainsFunc(st.Restarts, func(m string) bool {
		return strings.Contains(m, resourceID) && strings.Contains(m, "Unhealthy") && strings.Contains(m, gpudriver.UnhealthyFile)
	}) {
		t.Errorf("want a GangRestart event naming %s Unhealthy as its driver reported it, got %v", resourceID, st.Restarts)
	}
	if r := h.Explain(t, ns, "podgroup", "train"); r.LastRestart == nil || r.LastRestart.Reason != integrity.ReasonDeviceUnhealthy {
		t.Errorf("explain: want the last restart for %s, got %+v", integrity.ReasonDeviceUnhealthy, r.LastRestart)
	}
	for _, r := range after {
		if r.Node == sick.Node && slices.Contains(r.Devices, device) {
			t.Errorf("rank %s of the new incarnation got the unhealthy %s/%s", r.Pod, sick.Node, device)
		}
	}
	assertSawItsDevices(t, ctx, h, ns, after)
	assertJobCountedNothing(t, ctx, h, ns, "train", 0)
}

// TestDriverRestartLosesNothing: the driver of a node with a running rank is
// killed and started again; the rank keeps running (same pod, same process,
// no container restart), the node's ResourceSlice stays, what was prepared
// is still known, and the claim is unprepared when the Job goes.
func TestDriverRestartLosesNothing(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	rankJob(t, ctx, h, ns, "train", 2, 1)
	before := waitRanks(t, ctx, h, ns, "train", 2, nil)
	r := before[firstUID(before)]
	pids := rankProcesses(r.Pod)
	driver := r.Node + "-gpu-driver"
	h.KillComponent(t, driver)
	time.Sleep(2 * time.Second)
	h.StartComponent(t, ctx, driver)
	time.Sleep(settle)

	now, err := runningRanks(ctx, h, ns, "train")
	if err != nil {
		t.Fatal(err)
	}
	if !sameUIDs(before, now) {
		t.Fatalf("ranks changed across the driver's restart: before %v, now %v", podNames(before), podNames(now))
	}
	if got := rankProcesses(r.Pod); !slices.Equal(got, pids) {
		t.Errorf("rank %s's processes changed across the driver's restart: %v, then %v", r.Pod, pids, got)
	}
	p, err := h.Client.CoreV1().Pods(ns).Get(ctx, r.Pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.RestartCount != 0 {
			t.Errorf("container %s of %s restarted %d times", cs.Name, r.Pod, cs.RestartCount)
		}
	}
	if n, err := incarnation(ctx, h, ns, "train"); err != nil || n != 1 {
		t.Errorf("want the gang still in incarnation 1, got %d (%v)", n, err)
	}
	assertSawItsDevices(t, ctx, h, ns, now)

	if err := h.Client.BatchV1().Jobs(ns).Delete(ctx, "train", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, ctx, "the restarted driver to unprepare the claim its predecessor prepared", func(context.Context) (bool, string, error) {
		p := preparedFor(t, h, r.Node, ns)
		return len(p) == 0, fmt.Sprintf("still prepared: %v", p), nil
	})
}

// restartedWhole waits until the Job train runs again on as many new ranks
// as before and none of the old ones has a process left, and checks that
// the gang runs as its second incarnation.
func restartedWhole(t *testing.T, ctx context.Context, h *harness.Harness, ns string, before map[types.UID]rank) (map[types.UID]rank, harness.GroupState) {
	t.Helper()
	after := waitRanks(t, ctx, h, ns, "train", len(before), before)
	waitNoProcesses(t, ctx, "the first incarnation's processes gone", podNames(before))
	st, err := h.State(ctx, ns, "train")
	if err != nil {
		t.Fatal(err)
	}
	if st.Incarnation == nil || st.Incarnation.Number != 2 {
		t.Errorf("want the gang running as incarnation 2, got %s", st)
	}
	return after, st
}

func sameUIDs(a, b map[types.UID]rank) bool {
	if len(a) != len(b) {
		return false
	}
	for uid := range a {
		if _, ok := b[uid]; !ok {
			return false
		}
	}
	return true
}

func firstUID(ranks map[types.UID]rank) types.UID {
	uids := make([]types.UID, 0, len(ranks))
	for uid := range ranks {
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	return uids[0]
}

// exitRank asks the rank's process to exit with code, as a crash would
// (the rank serves /exit on its pod IP, which the node's bridge routes).
func exitRank(t *testing.T, ctx context.Context, r rank, code int) {
	t.Helper()
	url := fmt.Sprintf("http://%s:8080/exit?code=%d", r.IP, code)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("asking rank %s to exit: %v", r.Pod, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("asking rank %s to exit: %s", r.Pod, resp.Status)
	}
}

// TestStoppedRankThatExitsZeroIsReported: a rank that exits 0 when stopped
// (it handles SIGTERM and returns) is reported Succeeded by the real kubelet
// when Lockstep stops it for a gang restart, and its Job counts the index as
// completed — what no simulated node shows. Lockstep says so, on the pod's
// group, naming the pod, the Job's index and the remedy.
func TestStoppedRankThatExitsZeroIsReported(t *testing.T) {
	h := harness.Get(t)
	ns := h.Namespace(t)
	ctx := harness.Context(t, 3*time.Minute)
	rankJob(t, ctx, h, ns, "train", 2, 1, perIndexBackoff, func(j *batchv1.Job) {
		j.Spec.Template.Spec.Containers[0].Args = []string{"--exit-code-on-signal=0"}
	})
	before := waitRanks(t, ctx, h, ns, "train", 2, nil)
	crash := before[firstUID(before)]
	var stopped rank
	for _, r := range before {
		if r.UID != crash.UID {
			stopped = r
		}
	}
	exitRank(t, ctx, crash, 3)

	var warning string
	harness.Eventually(t, ctx, "a StoppedMemberSucceeded warning on the group", func(ctx context.Context) (bool, string, error) {
		evs, err := h.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=train,reason=" + integrity.ReasonStoppedMemberSucceeded})
		if err != nil {
			return false, "", err
		}
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, stopped.Pod) {
				warning = e.Message
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d events", len(evs.Items)), nil
	})
	t.Logf("warning: %s", warning)
	if !strings.Contains(warning, "index "+stopped.Index+" as completed") {
		t.Errorf("warning %q: want it to name index %s of the stopped rank", warning, stopped.Index)
	}
	harness.Eventually(t, ctx, "the Job to count the stopped rank's index "+stopped.Index+" as completed, as the warning says", func(ctx context.Context) (bool, string, error) {
		job, err := h.Client.BatchV1().Jobs(ns).Get(ctx, "train", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return job.Status.CompletedIndexes == stopped.Index, fmt.Sprintf("completed indexes %q", job.Status.CompletedIndexes), nil
	})
}
