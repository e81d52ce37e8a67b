package kubefilter

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache"
	"k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/util/assumecache"
	"k8s.io/utils/ptr"

	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/features"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// draCases is how many generated DRA cases TestDifferentialDRA decides;
// LOCKSTEP_DIFF_SEED=<seed> decides just that one.
const draCases = 1500

const gpuDriver = "gpu.example.com"

// TestDifferentialDRA decides generated clusters with ResourceSlices
// (exclusive and shared devices with capacity, device taints),
// DeviceClasses (one serving an extended resource), claims already
// allocated to running pods (exclusive, shared with consumed capacity) and
// a pending pod with claims (counts, selectors, capacity requests,
// prioritized alternatives, All, tolerations, a claim shared with a running
// pod) and extended resources — with Lockstep's placement and with
// kube-scheduler 1.37.2's DynamicResources and NodeResourcesFit plugins over
// its own DRA manager, in process, and requires the same feasible nodes.
func TestDifferentialDRA(t *testing.T) {
	ctx := context.Background()
	kube, mgr := draFilters(t, ctx)
	v := &verdicts{test: "TestDifferentialDRA"}
	for _, seed := range diffSeeds(t, 5000, draCases) {
		c := generateDRA(seed)
		if err := mgr.load(ctx, c); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		want, err := kubeVerdicts(ctx, kube, &genCase{nodes: c.nodes, existing: c.pods, pod: c.pod})
		if err != nil {
			t.Fatalf("seed %d: kube-scheduler: %v", seed, err)
		}
		snap := snapshot.New(snapshot.Input{Features: features.Default(), Nodes: c.nodes, Pods: c.pods, Slices: c.slices, Classes: c.classes, Claims: c.claims})
		got, err := placement.NodeVerdicts(ctx, snap, dra.New(snap, dra.NewCache()), placement.Member{Pod: c.pod, Claims: c.podClaims})
		if err != nil {
			t.Fatalf("seed %d: lockstep: %v", seed, err)
		}
		v.add(t, seed, c.nodes, want, got, c.describe)
	}
	v.done(t)
}

// draFilters builds kube-scheduler's default filters with DynamicResources
// over a DRA manager each case replaces.
func draFilters(t *testing.T, ctx context.Context) (*Filters, *swappableDRA) {
	t.Helper()
	client := fake.NewClientset()
	mgr := &swappableDRA{client: client, factory: informers.NewSharedInformerFactory(client, 0)}
	filters := append(append([]string(nil), kubeFilters...), names.DynamicResources)
	kube, err := newFilters(ctx, mgr.factory, client, filters, frameworkruntime.WithSharedDRAManager(mgr))
	if err != nil {
		t.Fatal(err)
	}
	return kube, mgr
}

// swappableDRA is the framework's DRA manager; each case loads a fresh
// kube-scheduler DRA manager (its claim assume cache fed synchronously).
type swappableDRA struct {
	client  *fake.Clientset
	factory informers.SharedInformerFactory
	cur     *dynamicresources.DefaultDRAManager
	// claims feeds the current manager's claim cache.
	claims cache.ResourceEventHandler
}

func (s *swappableDRA) ResourceClaims() fwk.ResourceClaimTracker { return s.cur.ResourceClaims() }
func (s *swappableDRA) ResourceSlices() fwk.ResourceSliceLister  { return s.cur.ResourceSlices() }
func (s *swappableDRA) DeviceClasses() fwk.DeviceClassLister     { return s.cur.DeviceClasses() }
func (s *swappableDRA) DeviceClassResolver() fwk.DeviceClassResolver {
	return s.cur.DeviceClassResolver()
}

// handlerCapture is an informer that only hands its handler back.
type handlerCapture struct{ h cache.ResourceEventHandler }

func (c *handlerCapture) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	c.h = h
	return nil, nil
}

func (s *swappableDRA) load(ctx context.Context, c *draCase) error {
	factory, client := s.factory, s.client
	sliceIdx := factory.Resource().V1().ResourceSlices().Informer().GetIndexer()
	classIdx := factory.Resource().V1().DeviceClasses().Informer().GetIndexer()
	var slices, classes []any
	for _, sl := range c.slices {
		slices = append(slices, sl)
	}
	for _, cl := range c.classes {
		classes = append(classes, cl)
	}
	if err := sliceIdx.Replace(slices, ""); err != nil {
		return err
	}
	if err := classIdx.Replace(classes, ""); err != nil {
		return err
	}
	tr, err := tracker.StartTracker(ctx, tracker.Options{SliceInformer: factory.Resource().V1().ResourceSlices(), KubeClient: client})
	if err != nil {
		return err
	}
	capture := &handlerCapture{}
	claims := assumecache.NewAssumeCache(klog.Background(), capture, "ResourceClaim", "", nil)
	s.cur = dynamicresources.NewDRAManager(ctx, claims, tr, factory)
	s.claims = capture.h
	for _, cl := range c.claims {
		s.claims.OnAdd(cl, true)
	}
	erc := s.cur.DeviceClassResolver().(*extendedresourcecache.ExtendedResourceCache)
	for _, cl := range c.classes {
		erc.OnAdd(cl, true)
	}
	return nil
}

type draCase struct {
	nodes     []*corev1.Node
	pods      []*corev1.Pod
	slices    []*resourcev1.ResourceSlice
	classes   []*resourcev1.DeviceClass
	claims    []*resourcev1.ResourceClaim
	pod       *corev1.Pod
	podClaims []types.NamespacedName
}

type draGen struct {
	gen
	// free are the devices not allocated yet, per node; shared those that
	// allow several allocations.
	free   map[string][]string
	shared map[string]bool
}

func generateDRA(seed uint64) *draCase {
	g := &draGen{gen: gen{r: rand.New(rand.NewPCG(seed, seed^0x51afd6c3))}, free: map[string][]string{}, shared: map[string]bool{}}
	c := &draCase{}
	c.classes = append(c.classes,
		&resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: resourcev1.DeviceClassSpec{Selectors: celSelector(`device.driver == "` + gpuDriver + `"`)}},
		&resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "h100"}, Spec: resourcev1.DeviceClassSpec{Selectors: celSelector(`device.driver == "` + gpuDriver + `" && device.attributes["` + gpuDriver + `"].model == "h100"`)}})
	if g.chance(0.5) {
		c.classes[0].Spec.ExtendedResourceName = ptr.To("example.com/gpu")
	}
	for i := 0; i < 1+g.r.IntN(3); i++ {
		name := fmt.Sprintf("node-%d", i)
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: g.nextUID(), Labels: map[string]string{corev1.LabelHostname: name}}}
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")}
		if g.chance(0.3) {
			n.Status.Allocatable["example.com/gpu"] = resource.MustParse("2") // a device plugin
		}
		n.Status.Capacity = n.Status.Allocatable.DeepCopy()
		c.nodes = append(c.nodes, n)
		if g.chance(0.8) {
			c.slices = append(c.slices, g.slice(name))
		}
	}
	for _, n := range c.nodes {
		if g.chance(0.6) {
			g.runningPod(c, n.Name)
		}
	}
	g.pendingPod(c)
	return c
}

func celSelector(expr string) []resourcev1.DeviceSelector {
	return []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: expr}}}
}

func (g *draGen) slice(node string) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-gpus"},
		Spec: resourcev1.ResourceSliceSpec{Driver: gpuDriver, NodeName: ptr.To(node),
			Pool: resourcev1.ResourcePool{Name: node, ResourceSliceCount: 1}},
	}
	for j := 0; j < 1+g.r.IntN(4); j++ {
		name := fmt.Sprintf("gpu-%d", j)
		d := resourcev1.Device{
			Name:       name,
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"model": {StringValue: ptr.To(g.pick("a100", "h100"))}},
			Capacity:   map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse(g.pick("40Gi", "80Gi"))}},
		}
		if g.chance(0.25) {
			d.AllowMultipleAllocations = ptr.To(true)
			g.shared[node+"/"+name] = true
		}
		if g.chance(0.15) {
			d.Taints = []resourcev1.DeviceTaint{{Key: "example.com/ecc", Effect: resourcev1.DeviceTaintEffectNoSchedule}}
		}
		s.Spec.Devices = append(s.Spec.Devices, d)
		g.free[node] = append(g.free[node], name)
	}
	return s
}

// runningPod binds a pod to node holding one device there through an
// allocated claim (a share of 40Gi when the device allows several).
func (g *draGen) runningPod(c *draCase, node string) {
	if len(g.free[node]) == 0 {
		return
	}
	i := g.r.IntN(len(g.free[node]))
	dev := g.free[node][i]
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "run-" + node, UID: g.nextUID()},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c"}}}}
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "held-" + node, UID: g.nextUID(), ResourceVersion: "1"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "r", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1}}}}}}
	result := resourcev1.DeviceRequestAllocationResult{Request: "r", Driver: gpuDriver, Pool: node, Device: dev}
	if g.shared[node+"/"+dev] {
		result.ShareID = ptr.To(g.nextUID())
		result.ConsumedCapacity = map[resourcev1.QualifiedName]resource.Quantity{"memory": resource.MustParse(g.pick("20Gi", "40Gi"))}
	} else {
		g.free[node] = append(g.free[node][:i], g.free[node][i+1:]...)
	}
	claim.Status.Allocation = &resourcev1.AllocationResult{
		Devices:      resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{result}},
		NodeSelector: nodeSelectorFor(node),
	}
	claim.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: p.Name, UID: p.UID}}
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claim.Name)}}
	c.pods = append(c.pods, p)
	c.claims = append(c.claims, claim)
}

func nodeSelectorFor(node string) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
		{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}
}

func (g *draGen) pendingPod(c *draCase) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "pending", UID: g.nextUID()},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
	if g.chance(0.4) {
		q := resource.MustParse(g.pick("1", "2", "3"))
		p.Spec.Containers[0].Resources.Requests["example.com/gpu"] = q
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"example.com/gpu": q}
	}
	for i := 0; i < g.r.IntN(3); i++ {
		if i == 0 && len(c.pods) > 0 && g.chance(0.15) {
			// A claim a running pod holds: pins the pod to its node.
			held := c.claims[g.r.IntN(len(c.claims))]
			p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: "shared", ResourceClaimName: ptr.To(held.Name)})
			c.podClaims = append(c.podClaims, types.NamespacedName{Namespace: held.Namespace, Name: held.Name})
			continue
		}
		name := fmt.Sprintf("c%d", i)
		claim := &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "pending-" + name, UID: g.nextUID(), ResourceVersion: "1",
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID, Controller: ptr.To(true)}}},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{g.request()}}},
		}
		c.claims = append(c.claims, claim)
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: name, ResourceClaimTemplateName: ptr.To("tmpl")})
		p.Status.ResourceClaimStatuses = append(p.Status.ResourceClaimStatuses, corev1.PodResourceClaimStatus{Name: name, ResourceClaimName: ptr.To(claim.Name)})
		c.podClaims = append(c.podClaims, types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name})
	}
	c.pod = p
}

func (g *draGen) request() resourcev1.DeviceRequest {
	exact := func(class string, count int64) *resourcev1.ExactDeviceRequest {
		e := &resourcev1.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count}
		if g.chance(0.3) {
			e.Tolerations = []resourcev1.DeviceToleration{{Key: "example.com/ecc", Operator: resourcev1.DeviceTolerationOpExists}}
		}
		return e
	}
	switch g.r.IntN(5) {
	case 0:
		return resourcev1.DeviceRequest{Name: "r", Exactly: exact("gpu", int64(1+g.r.IntN(3)))}
	case 1:
		return resourcev1.DeviceRequest{Name: "r", Exactly: exact("h100", 1)}
	case 2:
		e := exact("gpu", 1)
		e.Capacity = &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{"memory": resource.MustParse(g.pick("30Gi", "40Gi", "60Gi"))}}
		return resourcev1.DeviceRequest{Name: "r", Exactly: e}
	case 3:
		return resourcev1.DeviceRequest{Name: "r", FirstAvailable: []resourcev1.DeviceSubRequest{
			{Name: "h100s", DeviceClassName: "h100", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 2},
			{Name: "any", DeviceClassName: "gpu", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1},
		}}
	default:
		e := exact("h100", 0)
		e.AllocationMode, e.Count = resourcev1.DeviceAllocationModeAll, 0
		return resourcev1.DeviceRequest{Name: "r", Exactly: e}
	}
}

func (c *draCase) describe() string {
	var b strings.Builder
	for _, n := range c.nodes {
		fmt.Fprintf(&b, "  node %s allocatable %v\n", n.Name, n.Status.Allocatable)
	}
	for _, s := range c.slices {
		for _, d := range s.Spec.Devices {
			mem := d.Capacity["memory"].Value
			fmt.Fprintf(&b, "  device %s/%s model %s memory %s shared %v taints %d\n", s.Spec.Pool.Name, d.Name, *d.Attributes["model"].StringValue, mem.String(), ptr.Deref(d.AllowMultipleAllocations, false), len(d.Taints))
		}
	}
	for _, cl := range c.claims {
		fmt.Fprintf(&b, "  claim %s requests %+v allocated %v\n", cl.Name, cl.Spec.Devices.Requests, cl.Status.Allocation != nil)
	}
	fmt.Fprintf(&b, "  pending requests %v claims %v\n", c.pod.Spec.Containers[0].Resources.Requests, c.podClaims)
	return b.String()
}

// TestDifferentialDRAGang places generated gangs of 2–3 members with claims
// and extended resources: every member Lockstep places must pass
// kube-scheduler's filters (DynamicResources included) given the members
// placed before it and the devices Lockstep allocated them; a gang Lockstep
// refuses must have no placement in an exhaustive search with
// kube-scheduler's filters and its own allocations (Reserve/Unreserve).
func TestDifferentialDRAGang(t *testing.T) {
	ctx := context.Background()
	kube, mgr := draFilters(t, ctx)
	const cases = 800
	placed, failures := 0, 0
	for seed := uint64(90000); seed < 90000+cases; seed++ {
		c := generateDRA(seed)
		size := 2 + int(seed%2)
		members := c.gang(size)
		if err := mgr.load(ctx, c); err != nil {
			t.Fatal(err)
		}
		snap := snapshot.New(snapshot.Input{Features: features.Default(), Nodes: c.nodes, Pods: c.pods, Slices: c.slices, Classes: c.classes, Claims: c.claims})
		res, err := placement.Place(ctx, snap, dra.New(snap, dra.NewCache()), placement.Unit{Members: members, MinCount: size, Gang: true})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		ks, err := newKubeSearch(ctx, kube, &genCase{nodes: c.nodes, existing: c.pods})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Assignments) > 0 {
			placed++
			for i, a := range res.Assignments {
				ok, why, err := ks.fits(a.Pod, a.Node)
				if err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				if !ok {
					failures++
					t.Errorf("seed %d (LOCKSTEP_DIFF_SEED does not apply; rerun the gang test): Lockstep put member %d of %d on %s, kube-scheduler refuses it there: %s\n%s", seed, i, size, a.Node, why, c.describe())
					break
				}
				if err := ks.add(a.Pod, a.Node); err != nil {
					t.Fatal(err)
				}
				mgr.record(a)
			}
		} else if nodes, err := ks.searchReserving(members, 0, nil); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		} else if nodes != nil {
			failures++
			t.Errorf("seed %d: Lockstep finds no placement for a gang of %d, kube-scheduler's filters admit %v\n%s", seed, size, nodes, c.describe())
		}
		if failures > 20 {
			t.Fatal("too many disagreements")
		}
	}
	t.Logf("%d gangs, %d placed by Lockstep, %d disagreements", cases, placed, failures)
	if placed < cases/5 || placed > cases*4/5 {
		t.Errorf("generator is lopsided: %d of %d gangs placed", placed, cases)
	}
}

// gang replaces the pending pod by n members, each with its own copies of
// the pod's claims (a claim shared with a running pod stays shared).
func (c *draCase) gang(n int) []placement.Member {
	byName := map[string]*resourcev1.ResourceClaim{}
	for _, cl := range c.claims {
		byName[cl.Name] = cl
	}
	var out []placement.Member
	for i := 0; i < n; i++ {
		p := c.pod.DeepCopy()
		p.Name, p.UID = fmt.Sprintf("member-%d", i), types.UID(fmt.Sprintf("member-%d", i))
		m := placement.Member{Pod: p}
		p.Status.ResourceClaimStatuses = nil
		for _, pc := range p.Spec.ResourceClaims {
			if pc.ResourceClaimName != nil {
				m.Claims = append(m.Claims, types.NamespacedName{Namespace: p.Namespace, Name: *pc.ResourceClaimName})
				continue
			}
			tmpl := byName["pending-"+pc.Name]
			cl := tmpl.DeepCopy()
			cl.Name, cl.UID = p.Name+"-"+pc.Name, types.UID(p.Name+"-"+pc.Name)
			cl.OwnerReferences[0].Name, cl.OwnerReferences[0].UID = p.Name, p.UID
			c.claims = append(c.claims, cl)
			p.Status.ResourceClaimStatuses = append(p.Status.ResourceClaimStatuses, corev1.PodResourceClaimStatus{Name: pc.Name, ResourceClaimName: ptr.To(cl.Name)})
			m.Claims = append(m.Claims, types.NamespacedName{Namespace: cl.Namespace, Name: cl.Name})
		}
		out = append(out, m)
	}
	return out
}

// record puts what Lockstep allocated for a placed member into kube's DRA
// state, as the informer would show it once written.
func (s *swappableDRA) record(a placement.Assignment) {
	ref := resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: a.Pod.Name, UID: a.Pod.UID}
	for i, cl := range a.Claims {
		if !a.NewlyAllocated[i] {
			continue
		}
		cp := cl.DeepCopy()
		cp.ResourceVersion = "2"
		cp.Status.ReservedFor = append(cp.Status.ReservedFor, ref)
		s.claims.OnUpdate(cl, cp)
	}
	if a.Extended != nil {
		cp := a.Extended.Claim.DeepCopy()
		cp.Name, cp.UID, cp.ResourceVersion = a.Pod.Name+"-extended-resources", types.UID(a.Pod.Name+"-ext"), "1"
		cp.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{ref}
		s.claims.OnAdd(cp, false)
	}
}

// searchReserving is search with each member's Reserve run (kube-scheduler
// records the devices its Filter chose) and undone on backtracking.
func (k *kubeSearch) searchReserving(members []placement.Member, i int, placed []string) ([]string, error) {
	if i == len(members) {
		return placed, nil
	}
	pod := members[i].Pod
	for _, n := range k.c.nodes {
		kc := k.prefilter(pod)
		ok, _, err := k.filter(kc, pod, n.Name)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if st := k.f.fw.RunReservePluginsReserve(k.ctx, kc.state, pod, n.Name); !st.IsSuccess() {
			return nil, st.AsError()
		}
		if err := k.add(pod, n.Name); err != nil {
			return nil, err
		}
		got, err := k.searchReserving(members, i+1, append(placed, n.Name))
		k.f.fw.RunReservePluginsUnreserve(k.ctx, kc.state, pod, n.Name)
		if rerr := k.remove(pod, n.Name); rerr != nil {
			return nil, rerr
		}
		if err != nil || got != nil {
			return got, err
		}
	}
	return nil, nil
}
