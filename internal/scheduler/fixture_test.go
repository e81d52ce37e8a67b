package scheduler

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/kueuecheck"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/provision"
	"github.com/lockstep-dev/lockstep/internal/queue"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// fixture is a Scheduler on fake clients that behave as the API server
// does for what the scheduler writes (a binding sets the pod's node), its
// informers synced, its queue recording each cycle's transition and its
// events recorded. Tests run cycles one at a time (run).
type fixture struct {
	t      *testing.T
	ctx    context.Context
	s      *Scheduler
	client *fake.Clientset
	dyn    *dynamicfake.FakeDynamicClient
	clock  *testingclock.FakeClock
	events *events.FakeRecorder
	queue  *recordingQueue
	// failBind makes the binding of these pods fail (a write that fails
	// part way).
	failBind map[string]bool
}

// newFixture starts a scheduler on the cluster spec's nodes, slices and
// classes plus objs (pods, claims, PodGroups, DeviceTaintRules, …).
func newFixture(t *testing.T, spec string, objs ...runtime.Object) *fixture {
	t.Helper()
	return newFixtureServing(t, spec, []string{"podgroups", "compositepodgroups", "workloads"}, objs...)
}

// newFixtureServing is newFixture on an API server that serves, of
// Lockstep's kinds, those resources only (a CRD left out by an upgrade).
func newFixtureServing(t *testing.T, spec string, lockstep []string, objs ...runtime.Object) *fixture {
	t.Helper()
	return newFixtureAPI(t, spec, fixtureAPI{lockstep: lockstep}, objs...)
}

// fixtureAPI is what the fixture's API server serves and refuses.
type fixtureAPI struct {
	// lockstep are the resources of Lockstep's kinds served.
	lockstep []string
	// kueue: Kueue's API (kueue.x-k8s.io/v1beta2) is served; its objects
	// are unstructured ones among the fixture's objects.
	kueue bool
	// forbidLocalQueues: the scheduler may not list LocalQueues.
	forbidLocalQueues bool
	// check: the scheduler runs Kueue's placement check
	// (--kueue-placement-check).
	check bool
	// karpenter: the scheduler cooperates with Karpenter (--karpenter).
	karpenter bool
	// instanceTypes: Karpenter's API is served (its objects are
	// unstructured ones among the fixture's objects) and the scheduler may
	// ask for these (--karpenter --karpenter-instance-types).
	instanceTypes []provision.InstanceType
}

// newFixtureAPI is newFixture on an API server that serves what api says.
func newFixtureAPI(t *testing.T, spec string, api fixtureAPI, objs ...runtime.Object) *fixture {
	t.Helper()
	in := builders.SnapshotInput(t, spec)
	var typed, groups []runtime.Object
	for _, n := range in.Nodes {
		typed = append(typed, n)
	}
	for _, s := range in.Slices {
		typed = append(typed, s)
	}
	for _, c := range in.Classes {
		typed = append(typed, c)
	}
	for _, o := range objs {
		switch o := o.(type) {
		case *lockv1.PodGroup:
			u, err := podgroup.ToUnstructured(o)
			if err != nil {
				t.Fatal(err)
			}
			groups = append(groups, u)
		case *lockv1.CompositePodGroup:
			u, err := podgroup.CompositeToUnstructured(o)
			if err != nil {
				t.Fatal(err)
			}
			groups = append(groups, u)
		case *unstructured.Unstructured:
			groups = append(groups, o)
		default:
			typed = append(typed, o)
		}
	}
	f := &fixture{t: t, failBind: map[string]bool{}}
	f.client = fake.NewClientset(typed...)
	served := &metav1.APIResourceList{GroupVersion: lockv1.GroupVersion.String()}
	for _, r := range api.lockstep {
		served.APIResources = append(served.APIResources, metav1.APIResource{Name: r, Namespaced: true})
	}
	f.client.Resources = []*metav1.APIResourceList{{GroupVersion: "resource.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "devicetaintrules"}}}, served}
	if api.kueue {
		kueue := &metav1.APIResourceList{GroupVersion: kueuecheck.LocalQueueResource.GroupVersion().String()}
		for _, r := range []schema.GroupVersionResource{kueuecheck.WorkloadResource, kueuecheck.CheckResource, kueuecheck.FlavorResource, kueuecheck.LocalQueueResource} {
			kueue.APIResources = append(kueue.APIResources, metav1.APIResource{Name: r.Resource, Namespaced: r != kueuecheck.CheckResource && r != kueuecheck.FlavorResource})
		}
		f.client.Resources = append(f.client.Resources, kueue)
	}
	if api.instanceTypes != nil {
		f.client.Resources = append(f.client.Resources, &metav1.APIResourceList{GroupVersion: provision.NodeClaimResource.GroupVersion().String(),
			APIResources: []metav1.APIResource{{Name: provision.NodePoolResource.Resource}, {Name: provision.NodeClaimResource.Resource}}})
	}
	f.client.PrependReactor("create", "pods", f.bind)
	for _, g := range groups {
		g.(*unstructured.Unstructured).SetResourceVersion("1")
	}
	f.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		podgroup.Resource: "PodGroupList", podgroup.UpstreamResource: "PodGroupList",
		podgroup.CompositeResource: "CompositePodGroupList", podgroup.UpstreamCompositeResource: "CompositePodGroupList",
		kueuecheck.LocalQueueResource: "LocalQueueList", kueuecheck.WorkloadResource: "WorkloadList",
		kueuecheck.CheckResource: "AdmissionCheckList", kueuecheck.FlavorResource: "ResourceFlavorList",
		provision.NodePoolResource: "NodePoolList", provision.NodeClaimResource: "NodeClaimList",
	}, groups...)
	if api.forbidLocalQueues {
		f.dyn.PrependReactor("list", "localqueues", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(kueuecheck.LocalQueueResource.GroupResource(), "", fmt.Errorf(`User "lockstep-scheduler" cannot list resource "localqueues"`))
		})
	}
	f.dyn.PrependReactor("update", "podgroups", f.update(podgroup.Resource))
	f.dyn.PrependReactor("update", "compositepodgroups", f.update(podgroup.CompositeResource))
	f.clock = testingclock.NewFakeClock(time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC))
	logger, ctx := ktesting.NewTestContext(t)
	_ = logger
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	f.ctx = ctx
	s, err := New(f.client, f.dyn, Options{Clock: f.clock, KueuePlacementCheck: api.check, Karpenter: api.karpenter || api.instanceTypes != nil, KarpenterInstanceTypes: api.instanceTypes})
	if err != nil {
		t.Fatal(err)
	}
	f.events = events.NewFakeRecorder(1000)
	s.recorder = f.events
	f.queue = &recordingQueue{Queue: queue.New(f.clock, s.order), transitions: map[queue.Key][]string{}}
	s.queue = f.queue
	f.s = s
	if err := s.watch(ctx); err != nil {
		t.Fatal(err)
	}
	go s.podStatus.run(ctx)
	f.client.ClearActions()
	f.dyn.ClearActions()
	return f
}

// bind is the API server's pods/binding: the pod gets its node and the
// binding's annotations.
func (f *fixture) bind(a clienttesting.Action) (bool, runtime.Object, error) {
	if a.GetSubresource() != "binding" {
		return false, nil, nil
	}
	b := a.(clienttesting.CreateAction).GetObject().(*corev1.Binding)
	if f.failBind[b.Name] {
		return true, nil, fmt.Errorf("injected: binding %s fails", b.Name)
	}
	gvr := corev1.SchemeGroupVersion.WithResource("pods")
	obj, err := f.client.Tracker().Get(gvr, b.Namespace, b.Name)
	if err != nil {
		return true, nil, err
	}
	p := obj.(*corev1.Pod).DeepCopy()
	p.Spec.NodeName = b.Target.Name
	for k, v := range b.Annotations {
		metav1.SetMetaDataAnnotation(&p.ObjectMeta, k, v)
	}
	return true, b, f.client.Tracker().Update(gvr, p, b.Namespace)
}

// update is the API server's optimistic concurrency for PodGroups and
// CompositePodGroups:
// an update of a stale copy is a Conflict; a good one bumps the version.
func (f *fixture) update(gvr schema.GroupVersionResource) clienttesting.ReactionFunc {
	return func(a clienttesting.Action) (bool, runtime.Object, error) {
		u := a.(clienttesting.UpdateAction).GetObject().(*unstructured.Unstructured).DeepCopy()
		cur, err := f.dyn.Tracker().Get(gvr, u.GetNamespace(), u.GetName())
		if err != nil {
			return true, nil, err
		}
		rv := cur.(metav1.Object).GetResourceVersion()
		if u.GetResourceVersion() != rv {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), u.GetName(), fmt.Errorf("stale resourceVersion %s, have %s", u.GetResourceVersion(), rv))
		}
		n, _ := strconv.Atoi(rv)
		u.SetResourceVersion(strconv.Itoa(n + 1))
		return true, u, f.dyn.Tracker().Update(gvr, u, u.GetNamespace())
	}
}

// run runs one cycle for k, as the scheduling loop does, and waits for its
// binding cycle (if any) to end.
func (f *fixture) run(k queue.Key) {
	f.t.Helper()
	prio, _ := f.s.order(k)
	f.s.scheduleOne(f.ctx, queue.Item{Key: k, Priority: prio})
	f.s.bindings.Wait()
	f.s.podStatus.idle()
}

// waitFor waits until the scheduler's caches satisfy cond (informer events
// are asynchronous).
func (f *fixture) waitFor(what string, cond func() bool) {
	f.t.Helper()
	if err := wait.PollUntilContextTimeout(f.ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		f.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// writes are the scheduler's writes to the typed API as "verb resource[/sub] ns/name", in order.
func (f *fixture) writes() []string {
	var out []string
	for _, a := range f.client.Actions() {
		switch a.GetVerb() {
		case "get", "list", "watch":
			continue
		}
		res := a.GetResource().Resource
		if a.GetSubresource() != "" {
			res += "/" + a.GetSubresource()
		}
		name := ""
		switch a := a.(type) {
		case clienttesting.CreateAction: // updates too: they have the same methods
			if m, err := metaName(a.GetObject()); err == nil {
				name = m
			}
		case clienttesting.DeleteAction:
			name = a.GetName()
		case clienttesting.PatchAction:
			name = a.GetName()
		}
		out = append(out, fmt.Sprintf("%s %s %s/%s", a.GetVerb(), res, a.GetNamespace(), name))
	}
	return out
}

func metaName(o runtime.Object) (string, error) {
	if b, ok := o.(*corev1.Binding); ok {
		return b.Name, nil
	}
	m, err := metaAccessor(o)
	if err != nil {
		return "", err
	}
	return m.GetName(), nil
}

func metaAccessor(o runtime.Object) (metav1.Object, error) {
	m, ok := o.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no metadata", o)
	}
	return m, nil
}

// group is the PodGroup as the API server has it.
func (f *fixture) group(ns, name string) *lockv1.PodGroup {
	f.t.Helper()
	u, err := f.dyn.Resource(podgroup.Resource).Namespace(ns).Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	pg, err := podgroup.FromUnstructured(u)
	if err != nil {
		f.t.Fatal(err)
	}
	return pg
}

// pod is the pod as the API server has it.
func (f *fixture) pod(ns, name string) *corev1.Pod {
	f.t.Helper()
	p, err := f.client.CoreV1().Pods(ns).Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

// claim is the claim as the API server has it.
func (f *fixture) claim(ns, name string) *resourcev1.ResourceClaim {
	f.t.Helper()
	c, err := f.client.ResourceV1().ResourceClaims(ns).Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// drainEvents returns the events recorded so far.
func (f *fixture) drainEvents() []string {
	var out []string
	for {
		select {
		case e := <-f.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// recordingQueue records, per unit, the transition each cycle ended in.
type recordingQueue struct {
	*queue.Queue
	mu          sync.Mutex
	transitions map[queue.Key][]string
}

func (q *recordingQueue) record(k queue.Key, what string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.transitions[k] = append(q.transitions[k], what)
}

func (q *recordingQueue) of(k queue.Key) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return strings.Join(q.transitions[k], ",")
}

func (q *recordingQueue) Done(k queue.Key) { q.record(k, "Done"); q.Queue.Done(k) }

// Add records the adds of Kueue workloads only (the informers add units
// all the time; a placement check is added when something changes for it).
func (q *recordingQueue) Add(k queue.Key) {
	if k.Kind == queue.Workload {
		q.record(k, "Add")
	}
	q.Queue.Add(k)
}
func (q *recordingQueue) Unschedulable(k queue.Key) {
	q.record(k, "Unschedulable")
	q.Queue.Unschedulable(k)
}
func (q *recordingQueue) BeyondCapacity(k queue.Key, recheck time.Duration) {
	q.record(k, "BeyondCapacity")
	q.Queue.BeyondCapacity(k, recheck)
}
func (q *recordingQueue) Wait(k queue.Key)  { q.record(k, "Wait"); q.Queue.Wait(k) }
func (q *recordingQueue) Retry(k queue.Key) { q.record(k, "Retry"); q.Queue.Retry(k) }

// WaitPaced records a Wait (a paced one when its gap is not zero).
func (q *recordingQueue) WaitPaced(k queue.Key, gap time.Duration) {
	if gap > 0 {
		q.record(k, "WaitPaced")
	} else {
		q.record(k, "Wait")
	}
	q.Queue.WaitPaced(k, gap)
}
func (q *recordingQueue) WaitFor(k queue.Key, d time.Duration) {
	q.record(k, "WaitFor")
	q.Queue.WaitFor(k, d)
}

// gpuPods are n pending Lockstep pods of group (none: lone pods) at
// priority prio, each with its own claim for one GPU of gpu.example.com
// (as generated from a template).
func gpuPods(ns, group, prefix string, n int, prio int32) []runtime.Object {
	var out []runtime.Object
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s-%d", prefix, i)
		b := builders.MakePod().Namespace(ns).Name(name).Scheduler(lockv1.SchedulerName).ClaimTemplate("gpu", "one-gpu")
		if group != "" {
			b = b.Member(group)
		}
		p := b.Obj()
		p.UID = types.UID(ns + "-" + name)
		p.Spec.Priority = ptr.To(prio)
		claim := builders.Claim(ns, name+"-gpu", "gpu.example.com", 1)
		p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To(claim.Name)}}
		claim.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: name, UID: p.UID, Controller: ptr.To(true)}}
		out = append(out, p, claim)
	}
	return out
}

// running makes the pods of objs bound to node and running, their claims
// allocated devices gpu-<first>… of that node's pool and reserved for them.
func running(objs []runtime.Object, node string, first int) []runtime.Object {
	dev := first
	pods := map[string]*corev1.Pod{}
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			p.Spec.NodeName = node
			p.Status.Phase = corev1.PodRunning
			pods[p.Name+"-gpu"] = p
		}
	}
	for _, o := range objs {
		c, ok := o.(*resourcev1.ResourceClaim)
		if !ok {
			continue
		}
		p := pods[c.Name]
		c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
			Request: c.Spec.Devices.Requests[0].Name, Driver: "gpu.example.com", Pool: node, Device: fmt.Sprintf("gpu-%d", dev),
		}}}}
		c.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: p.Name, UID: p.UID}}
		dev++
	}
	return objs
}

// compositeOf is the CompositePodGroup as the API server has it.
func (f *fixture) compositeOf(ns, name string) *lockv1.CompositePodGroup {
	f.t.Helper()
	u, err := f.dyn.Resource(podgroup.CompositeResource).Namespace(ns).Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	c, err := podgroup.CompositeFromUnstructured(u)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// runningGang is gang ns/name of n one-GPU pods of priority prio, running
// on node since started, and its PodGroup (annotations set; with a first
// incarnation when incarnation is set).
func runningGang(ns, name, node string, n int, prio int32, started time.Time, annotations map[string]string, incarnation bool) []runtime.Object {
	objs := running(gpuPods(ns, name, name, n, prio), node, 0)
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			p.Status.StartTime = &metav1.Time{Time: started}
		}
	}
	pg := builders.GangPodGroup(ns, name, int32(n))
	pg.Annotations = annotations
	if incarnation {
		pg.Status.Incarnation = &lockv1.PodGroupIncarnation{Number: 1, MinCount: int32(n), BoundTime: metav1.NewTime(started), LastBoundTime: metav1.NewTime(started)}
	}
	return append(objs, pg)
}
