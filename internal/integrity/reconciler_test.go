package integrity

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/integrations"
	"github.com/lockstep-dev/lockstep/internal/metrics"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/builders"
)

var now = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// boundGang is a namespace, its nodes, a PodGroup of n running members
// recorded a minute ago, and the members.
func boundGang(n int) (objs []client.Object, pg *lockv1.PodGroup, pods []*corev1.Pod) {
	objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ml"}})
	for i := 0; i < 2; i++ {
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i)},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}})
	}
	for i := 0; i < n; i++ {
		p := builders.MakePod().Namespace("ml").Name(fmt.Sprintf("train-%d", i)).Member("train").Node(fmt.Sprintf("node-%d", i%2)).Obj()
		p.UID = types.UID(fmt.Sprintf("uid-%d", i))
		p.Status.Phase = corev1.PodRunning
		pods = append(pods, p)
	}
	pg = builders.GangPodGroup("ml", "train", int32(n))
	pg.Status.Incarnation = podgroup.Record(nil, int32(n), pods, pods, metav1.NewTime(now.Add(-time.Minute)))
	return append(objs, pg), pg, pods
}

func indexedClient(objs ...client.Object) client.Client {
	return fake.NewClientBuilder().WithScheme(integrations.Scheme()).WithObjects(objs...).
		WithStatusSubresource(&lockv1.PodGroup{}, &corev1.Pod{}).
		WithIndex(&corev1.Pod{}, indexGroup, func(o client.Object) []string { return []string{podgroup.GroupOf(o.(*corev1.Pod))} }).
		WithIndex(&corev1.Pod{}, indexNodeName, func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
		Build()
}

func testReconciler(cache, apiServer client.Client) (*Reconciler, *record.FakeRecorder) {
	rec := record.NewFakeRecorder(10)
	m, err := metrics.NewIntegrity(prometheus.NewRegistry())
	if err != nil {
		panic(err)
	}
	return &Reconciler{
		Client: cache, Reader: apiServer, Recorder: rec, NodeGrace: 40 * time.Second, Integrations: integrations.All(),
		Clock:   clocktesting.NewFakePassiveClock(now),
		metrics: m,
		slices:  &sliceSource{taints: newTaintIndex()},
	}, rec
}

// TestReconcileWithPodCacheBehind: the pod cache holds none of a running
// gang's members (its informer is behind the PodGroup's after an API server
// restart): the API server is read, and only a member it has no pod of is
// a loss. Nothing is evicted from a cache that does not hold the members.
func TestReconcileWithPodCacheBehind(t *testing.T) {
	cases := map[string]struct {
		deleted []int // members the API server has no pod of
		want    string
		restart string
		events  int
	}{
		"every member runs: no loss, no write beyond the Running condition": {want: lockv1.RunningReasonRunning},
		"one member was deleted: the gang restarts":                         {deleted: []int{3}, want: lockv1.RunningReasonFailed, restart: ReasonMemberLost, events: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs, pg, pods := boundGang(8)
			var live []client.Object
			for i, p := range pods {
				if !contains(tc.deleted, int32(i)) {
					live = append(live, p)
				}
			}
			apiServer := indexedClient(append(append([]client.Object{}, objs...), live...)...)
			r, rec := testReconciler(indexedClient(objs...), apiServer)
			ctx := context.Background()
			if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pg)}); err != nil {
				t.Fatal(err)
			}
			got := &lockv1.PodGroup{}
			if err := r.Client.Get(ctx, client.ObjectKeyFromObject(pg), got); err != nil {
				t.Fatal(err)
			}
			running := meta.FindStatusCondition(got.Status.Conditions, lockv1.Running)
			if running == nil || running.Reason != tc.want {
				t.Fatalf("Running condition: want reason %s, got %+v", tc.want, running)
			}
			restart := ""
			if c := meta.FindStatusCondition(got.Status.Conditions, lockv1.DisruptionTarget); c != nil {
				restart = c.Reason
			}
			if diff := cmp.Diff(tc.restart, restart); diff != "" {
				t.Errorf("DisruptionTarget reason (-want,+got):\n%s", diff)
			}
			if tc.restart == "" && got.Status.Incarnation.Ended != nil {
				t.Errorf("incarnation ended: %+v", got.Status.Incarnation.Ended)
			}
			if diff := cmp.Diff(tc.events, len(rec.Events)); diff != "" {
				t.Errorf("events (-want,+got):\n%s", diff)
			}
			for _, p := range live {
				cur := &corev1.Pod{}
				if err := apiServer.Get(ctx, client.ObjectKeyFromObject(p), cur); err != nil || cur.DeletionTimestamp != nil || podgroup.Disruption(cur) != nil {
					t.Errorf("member %s evicted (err %v)", p.GetName(), err)
				}
			}
		})
	}
}

// TestOwnerThroughIntegrations: a group's owner is the object of its
// controller's kind that the integration set resolves.
func TestOwnerThroughIntegrations(t *testing.T) {
	job := builders.IndexedJob("ml", "train", 4, builders.MakePod().Member("train").Obj())
	job.UID = "job-uid"
	suspended := job.DeepCopy()
	suspended.Spec.Suspend = ptr.To(true)
	ctl := func(apiVersion, kind, name string, uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}
	}
	cases := map[string]struct {
		refs []metav1.OwnerReference
		objs []client.Object
		want *Owner
	}{
		"a Job":                         {refs: ctl("batch/v1", "Job", "train", "job-uid"), objs: []client.Object{job}, want: &Owner{Name: "Job ml/train", Size: 4}},
		"a suspended Job":               {refs: ctl("batch/v1", "Job", "train", "job-uid"), objs: []client.Object{suspended}, want: &Owner{Name: "Job ml/train", Stopped: "suspended", Suspended: true, Size: 4}},
		"a Job that is gone":            {refs: ctl("batch/v1", "Job", "train", "job-uid"), want: &Owner{Name: "Job ml/train", Stopped: "deleted", Failed: true}},
		"a Job of that name, recreated": {refs: ctl("batch/v1", "Job", "train", "old-uid"), objs: []client.Object{job}, want: &Owner{Name: "Job ml/train", Stopped: "deleted", Failed: true}},
		"a kind no integration runs":    {refs: ctl("apps/v1", "ReplicaSet", "train", "rs-uid")},
		"another version of the kind":   {refs: ctl("batch/v2", "Job", "train", "job-uid"), objs: []client.Object{job}},
		"no controller (bare pods)":     {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pg := builders.GangPodGroup("ml", "train", 4)
			pg.OwnerReferences = tc.refs
			r, _ := testReconciler(indexedClient(tc.objs...), nil)
			got, err := r.owner(context.Background(), pg)
			if err != nil {
				t.Fatal(err)
			}
			if got != nil {
				got.Wants = nil
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("owner (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestReconcileUnhealthyDevice: a member whose kubelet reports its device
// Unhealthy is told of on its pod and its group, naming the device, and
// counted once; with disruptionMode all the gang restarts whole, with
// single that member alone is taken down.
func TestReconcileUnhealthyDevice(t *testing.T) {
	cases := map[string]struct {
		single  bool
		evicted []string
		events  []string
	}{
		"disruptionMode all": {evicted: []string{"train-0", "train-1", "train-2"}, events: []string{
			"Warning GangRestart device gpu.example.com/node-1/gpu-3 (claim:train-1-gpu/gpu) is Unhealthy: XID 79 of pod train-1: restarting the whole gang (disruptionMode all), evicting 3 running members",
			"Warning DeviceUnhealthy Device gpu.example.com/node-1/gpu-3 (claim:train-1-gpu/gpu) is Unhealthy: XID 79: the whole gang restarts (disruptionMode all)",
			"Warning DeviceUnhealthy pod train-1: device gpu.example.com/node-1/gpu-3 (claim:train-1-gpu/gpu) is Unhealthy: XID 79: the whole gang restarts (disruptionMode all)",
		}},
		"disruptionMode single": {single: true, evicted: []string{"train-1"}, events: []string{
			"Warning DeviceUnhealthy Device gpu.example.com/node-1/gpu-3 (claim:train-1-gpu/gpu) is Unhealthy: XID 79: this member is taken down alone (disruptionMode single)",
			"Warning DeviceUnhealthy pod train-1: device gpu.example.com/node-1/gpu-3 (claim:train-1-gpu/gpu) is Unhealthy: XID 79: this member is taken down alone (disruptionMode single)",
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs, pg, pods := boundGang(3)
			if tc.single {
				pg.Spec.DisruptionMode = &lockv1.DisruptionMode{Single: &lockv1.SingleDisruptionMode{}}
			}
			pods[1].Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", AllocatedResourcesStatus: []corev1.ResourceStatus{{
				Name:      "claim:train-1-gpu/gpu",
				Resources: []corev1.ResourceHealth{{ResourceID: "gpu.example.com/node-1/gpu-3", Health: corev1.ResourceHealthStatusUnhealthy, Message: ptr.To("XID 79")}},
			}}}}
			all := append([]client.Object{}, objs...)
			for _, p := range pods {
				all = append(all, p)
			}
			c := indexedClient(all...)
			r, rec := testReconciler(c, c)
			reg := prometheus.NewRegistry()
			var err error
			if r.metrics, err = metrics.NewIntegrity(reg); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for i := 0; i < 2; i++ { // a second pass finds nothing new to tell
				if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pg)}); err != nil {
					t.Fatal(err)
				}
			}
			var events []string
			for len(rec.Events) > 0 {
				events = append(events, <-rec.Events)
			}
			if diff := cmp.Diff(tc.events, events); diff != "" {
				t.Errorf("events (-want,+got):\n%s", diff)
			}
			var evicted []string
			for _, p := range pods {
				cur := &corev1.Pod{}
				if err := c.Get(ctx, client.ObjectKeyFromObject(p), cur); err != nil || cur.DeletionTimestamp != nil {
					evicted = append(evicted, p.Name)
				}
			}
			if diff := cmp.Diff(tc.evicted, evicted); diff != "" {
				t.Errorf("evicted (-want,+got):\n%s", diff)
			}
			families, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			counted := map[string]float64{}
			for _, f := range families {
				for _, m := range f.GetMetric() {
					key := f.GetName()
					for _, l := range m.GetLabel() {
						key += " " + l.GetName() + "=" + l.GetValue()
					}
					counted[key] = m.GetCounter().GetValue()
				}
			}
			want := map[string]float64{"lockstep_unhealthy_devices_total resource=gpu.example.com": 1}
			if !tc.single {
				want["lockstep_gang_restarts_total reason=DeviceUnhealthy"] = 1
			}
			if diff := cmp.Diff(want, counted); diff != "" {
				t.Errorf("metrics (-want,+got):\n%s", diff)
			}
		})
	}
}
