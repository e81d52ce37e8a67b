package kubefilter

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/utils/ptr"

	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/features"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// volumeCases is how many generated cases TestDifferentialVolumes decides.
const volumeCases = 1500

// csiDriver is the one CSI driver of the generated clusters.
const csiDriver = "csi.example.com"

// TestDifferentialVolumes decides generated clusters with storage — local
// PersistentVolumes pinned to nodes, zonal CSI volumes (bound, labelled and
// node-affine), StorageClasses that bind immediately or wait for the first
// consumer, with and without a provisioner, allowed topologies, CSI storage
// capacity, CSI attach limits per node, ReadWriteOncePod claims in use,
// generic ephemeral volumes, missing claims — and a pending pod with up to
// three volumes, with Lockstep's placement and with kube-scheduler 1.37.2's
// VolumeRestrictions, NodeVolumeLimits, VolumeBinding and VolumeZone (and the
// rest of its default filters), and requires the same feasible nodes.
func TestDifferentialVolumes(t *testing.T) {
	ctx := context.Background()
	kube, lockstep, storage := volumeFilters(t, ctx)
	v := &verdicts{test: "TestDifferentialVolumes", reasons: map[string]int{}}
	for _, seed := range diffSeeds(t, 20000, volumeCases) {
		c := generateVolumes(seed)
		if err := storage.load(c); err != nil {
			t.Fatal(err)
		}
		gc := &genCase{nodes: c.nodes, existing: c.existing, pod: c.pod}
		want, err := kubeVerdicts(ctx, kube, gc)
		if err != nil {
			t.Fatalf("seed %d: kube-scheduler: %v", seed, err)
		}
		got, err := lockstepVerdicts(ctx, lockstep, gc)
		if err != nil {
			t.Fatalf("seed %d: lockstep: %v", seed, err)
		}
		v.add(t, seed, c.nodes, want, got, c.describe)
	}
	v.done(t)
}

// TestDifferentialVolumeGang does the same for gangs of 2–3 members, each
// with its own claims waiting for their first consumer (local volumes, a
// provisioned class with capacity): a placement Lockstep finds must pass
// kube-scheduler's filters member by member, each member seeing the
// volumes kube-scheduler's own VolumeBinding Reserve assumed for the ones
// before it; a gang Lockstep refuses must have no placement in an
// exhaustive search with kube-scheduler's filters and Reserve.
func TestDifferentialVolumeGang(t *testing.T) {
	ctx := context.Background()
	kube, lockstep, storage := volumeFilters(t, ctx)
	const cases = 600
	placed, failures := 0, 0
	for seed := uint64(70000); seed < 70000+cases; seed++ {
		c := generateVolumes(seed)
		size := 2 + int(seed%2)
		members := c.gang(size)
		if err := storage.load(c); err != nil {
			t.Fatal(err)
		}
		snap := snapshot.New(snapshot.Input{Features: features.Default(), Nodes: c.nodes, Pods: c.existing})
		snap.Constraints = lockstep.NewView(c.nodes, c.existing)
		res, err := placement.Place(ctx, snap, dra.New(snap, dra.NewCache()), placement.Unit{Members: members, MinCount: size, Gang: true})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		ks, err := newKubeSearch(ctx, kube, &genCase{nodes: c.nodes, existing: c.existing})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Assignments) > 0 {
			placed++
			var reserved []kubeReserved
			for i, a := range res.Assignments {
				kc := ks.prefilter(a.Pod)
				ok, why, err := ks.filter(kc, a.Pod, a.Node)
				if err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				if !ok {
					failures++
					t.Errorf("seed %d: Lockstep put member %d of %d on %s, kube-scheduler refuses it there: %s\n%s", seed, i, size, a.Node, why, c.describe())
					break
				}
				if st := kube.fw.RunReservePluginsReserve(ctx, kc.state, a.Pod, a.Node); !st.IsSuccess() {
					t.Fatalf("seed %d: kube-scheduler Reserve: %v", seed, st.AsError())
				}
				reserved = append(reserved, kubeReserved{kc, a})
				if err := ks.add(a.Pod, a.Node); err != nil {
					t.Fatal(err)
				}
			}
			for _, r := range reserved {
				kube.fw.RunReservePluginsUnreserve(ctx, r.kc.state, r.a.Pod, r.a.Node)
			}
			for _, a := range res.Assignments {
				if a.Volumes != nil {
					a.Volumes.Unreserve(ctx)
				}
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

// caseName matches the object names of one case in a reason.
var caseName = regexp.MustCompile(`"s[0-9]+-[^"]*"`)

type kubeReserved struct {
	kc kubeCheck
	a  placement.Assignment
}

// volumeFilters builds kube-scheduler's default filters and Lockstep's
// over one fake cluster's listers, whose storage objects each case replaces.
func volumeFilters(t *testing.T, ctx context.Context) (kube, lockstep *Filters, storage *storageObjects) {
	t.Helper()
	kube, lockstep, factory := diffFiltersOver(t, ctx)
	return kube, lockstep, &storageObjects{factory: factory}
}

// storageObjects loads a case's storage objects into the informers' stores
// (kube-scheduler's volume caches read those stores; assumptions are
// undone by each test, and every case's object names are its own).
type storageObjects struct {
	factory informers.SharedInformerFactory
}

func (s *storageObjects) load(c *volumeCase) error {
	f := s.factory
	var pvs, pvcs, classes, csiNodes, drivers, capacities []any
	for _, o := range c.pvs {
		pvs = append(pvs, o)
	}
	for _, o := range c.pvcs {
		pvcs = append(pvcs, o)
	}
	for _, o := range c.classes {
		classes = append(classes, o)
	}
	for _, o := range c.csiNodes {
		csiNodes = append(csiNodes, o)
	}
	for _, o := range c.drivers {
		drivers = append(drivers, o)
	}
	for _, o := range c.capacities {
		capacities = append(capacities, o)
	}
	for _, r := range []struct {
		store interface {
			Replace([]any, string) error
		}
		objs []any
	}{
		{f.Core().V1().PersistentVolumes().Informer().GetIndexer(), pvs},
		{f.Core().V1().PersistentVolumeClaims().Informer().GetIndexer(), pvcs},
		{f.Storage().V1().StorageClasses().Informer().GetIndexer(), classes},
		{f.Storage().V1().CSINodes().Informer().GetIndexer(), csiNodes},
		{f.Storage().V1().CSIDrivers().Informer().GetIndexer(), drivers},
		{f.Storage().V1().CSIStorageCapacities().Informer().GetIndexer(), capacities},
	} {
		if err := r.store.Replace(r.objs, ""); err != nil {
			return err
		}
	}
	return nil
}

type volumeCase struct {
	seed       uint64
	prefix     string
	nodes      []*corev1.Node
	existing   []*corev1.Pod
	pod        *corev1.Pod
	pvs        []*corev1.PersistentVolume
	pvcs       []*corev1.PersistentVolumeClaim
	classes    []*storagev1.StorageClass
	csiNodes   []*storagev1.CSINode
	drivers    []*storagev1.CSIDriver
	capacities []*storagev1.CSIStorageCapacity
	// claimable are the claims a pending pod may name.
	claimable []string
}

type volumeGen struct {
	gen
	c *volumeCase
}

// The storage classes: local volumes created by hand (no provisioner);
// a CSI class that provisions on the first consumer's node; one that binds
// at once.
const (
	classLocal     = "local"
	classWFFC      = "fast"
	classImmediate = "instant"
)

func generateVolumes(seed uint64) *volumeCase {
	g := &volumeGen{gen: gen{r: rand.New(rand.NewPCG(seed, seed^0x2545f4914f6cdd1d))}}
	c := &volumeCase{seed: seed, prefix: fmt.Sprintf("s%d-", seed)}
	g.c = c
	for i := 0; i < 1+g.r.IntN(4); i++ {
		name := fmt.Sprintf("node-%d", i)
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: g.nextUID(), Labels: map[string]string{corev1.LabelHostname: name}}}
		if g.chance(0.85) {
			n.Labels[corev1.LabelTopologyZone] = g.pick("zone-a", "zone-b")
		}
		n.Status.Allocatable = corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110"),
		}
		n.Status.Capacity = n.Status.Allocatable.DeepCopy()
		c.nodes = append(c.nodes, n)
		if g.chance(0.7) {
			d := storagev1.CSINodeDriver{Name: csiDriver, NodeID: name}
			if g.chance(0.6) {
				d.Allocatable = &storagev1.VolumeNodeResources{Count: ptr.To(int32(1 + g.r.IntN(3)))}
			}
			c.csiNodes = append(c.csiNodes, &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{d}}})
		}
	}
	capacity := g.chance(0.5)
	c.drivers = []*storagev1.CSIDriver{{ObjectMeta: metav1.ObjectMeta{Name: csiDriver}, Spec: storagev1.CSIDriverSpec{StorageCapacity: ptr.To(capacity)}}}
	wffc, immediate := storagev1.VolumeBindingWaitForFirstConsumer, storagev1.VolumeBindingImmediate
	fast := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: classWFFC}, Provisioner: csiDriver, VolumeBindingMode: &wffc}
	if g.chance(0.3) {
		fast.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: corev1.LabelTopologyZone, Values: []string{g.pick("zone-a", "zone-b")}}}}}
	}
	c.classes = []*storagev1.StorageClass{
		{ObjectMeta: metav1.ObjectMeta{Name: classLocal}, Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &wffc},
		fast,
		{ObjectMeta: metav1.ObjectMeta{Name: classImmediate}, Provisioner: csiDriver, VolumeBindingMode: &immediate},
	}
	if capacity {
		for _, zone := range []string{"zone-a", "zone-b"} {
			if g.chance(0.8) {
				c.capacities = append(c.capacities, &storagev1.CSIStorageCapacity{
					ObjectMeta:       metav1.ObjectMeta{Namespace: "kube-system", Name: c.prefix + "cap-" + zone},
					NodeTopology:     &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelTopologyZone: zone}},
					StorageClassName: classWFFC,
					Capacity:         ptr.To(resource.MustParse(g.pick("2Gi", "20Gi"))),
				})
			}
		}
	}
	// Local volumes, some already bound to running pods' claims.
	for _, n := range c.nodes {
		for j := 0; j < g.r.IntN(3); j++ {
			pv := g.pv(fmt.Sprintf("local-%s-%d", n.Name, j), classLocal, g.pick("1Gi", "10Gi"))
			pv.Spec.Local = &corev1.LocalVolumeSource{Path: "/mnt/disk"}
			pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: nodeSelectorFor(n.Name)}
			if g.chance(0.3) {
				g.runningWith(n.Name, g.bind(pv, classLocal))
			}
		}
	}
	// Zonal CSI volumes, bound to claims; some in use by running pods.
	for j := 0; j < g.r.IntN(4); j++ {
		zone := g.pick("zone-a", "zone-b")
		pv := g.pv(fmt.Sprintf("zonal-%d", j), g.pick(classWFFC, ""), "10Gi")
		pv.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: csiDriver, VolumeHandle: fmt.Sprintf("vol-%d", j)}
		if g.chance(0.6) {
			pv.Labels = map[string]string{corev1.LabelTopologyZone: zone} // read by VolumeZone
		}
		if g.chance(0.6) {
			pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}},
			}}}}
		}
		claim := g.bind(pv, pv.Spec.StorageClassName)
		if g.chance(0.3) {
			claim.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}
			pv.Spec.AccessModes = claim.Spec.AccessModes
		}
		if g.chance(0.4) {
			g.runningWith(c.nodes[g.r.IntN(len(c.nodes))].Name, claim)
		}
		c.claimable = append(c.claimable, claim.Name)
	}
	// Unbound claims: waiting for a local volume, for provisioning, and
	// one of a class that binds at once (not bound yet).
	for j := 0; j < 2; j++ {
		c.claimable = append(c.claimable, g.claim(fmt.Sprintf("wait-%d", j), classLocal, g.pick("1Gi", "5Gi")).Name)
	}
	c.claimable = append(c.claimable, g.claim("provision", classWFFC, g.pick("1Gi", "5Gi")).Name)
	if g.chance(0.3) {
		c.claimable = append(c.claimable, g.claim("immediate", classImmediate, "1Gi").Name)
	}
	c.pod = &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: c.prefix + "pending", UID: g.nextUID()},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main"}}},
	}
	for i := 0; i < 1+g.r.IntN(3); i++ {
		name := fmt.Sprintf("v%d", i)
		switch k := g.r.IntN(10); {
		case k == 0:
			// A claim that does not exist (yet).
			c.pod.Spec.Volumes = append(c.pod.Spec.Volumes, claimVolume(name, c.prefix+"missing"))
		case k == 1:
			// A generic ephemeral volume; its claim exists (owned by the
			// pod) or the ephemeral volume controller has not made it yet.
			c.pod.Spec.Volumes = append(c.pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
				VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: claimSpec(classWFFC, "1Gi")},
			}}})
			if g.chance(0.7) {
				pvc := g.claim("", classWFFC, "1Gi")
				pvc.Name = c.pod.Name + "-" + name
				pvc.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: c.pod.Name, UID: c.pod.UID, Controller: ptr.To(true)}}
			}
		case k == 2:
			c.pod.Spec.Volumes = append(c.pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		default:
			c.pod.Spec.Volumes = append(c.pod.Spec.Volumes, claimVolume(name, c.claimable[g.r.IntN(len(c.claimable))]))
		}
	}
	if g.chance(0.2) {
		c.pod.Spec.NodeSelector = map[string]string{corev1.LabelTopologyZone: g.pick("zone-a", "zone-b")}
	}
	return c
}

func (g *volumeGen) pv(name, class, size string) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: g.c.prefix + name, UID: g.nextUID(), ResourceVersion: "1"},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName: class,
			Capacity:         corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeAvailable},
	}
	g.c.pvs = append(g.c.pvs, pv)
	return pv
}

func claimSpec(class, size string) corev1.PersistentVolumeClaimSpec {
	return corev1.PersistentVolumeClaimSpec{
		StorageClassName: ptr.To(class),
		AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
	}
}

// claim adds an unbound claim.
func (g *volumeGen) claim(name, class, size string) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: g.c.prefix + name, UID: g.nextUID(), ResourceVersion: "1"},
		Spec:       claimSpec(class, size),
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}
	g.c.pvcs = append(g.c.pvcs, pvc)
	return pvc
}

// bind adds a claim bound to pv.
func (g *volumeGen) bind(pv *corev1.PersistentVolume, class string) *corev1.PersistentVolumeClaim {
	pvc := g.claim("claim-"+pv.Name[len(g.c.prefix):], class, pv.Spec.Capacity.Storage().String())
	pvc.Spec.VolumeName = pv.Name
	pvc.Status.Phase = corev1.ClaimBound
	pvc.Status.AccessModes = pvc.Spec.AccessModes
	pvc.Status.Capacity = pv.Spec.Capacity
	pvc.Annotations = map[string]string{"pv.kubernetes.io/bind-completed": "yes"}
	pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID}
	pv.Status.Phase = corev1.VolumeBound
	return pvc
}

// runningWith adds a running pod on node that uses claim.
func (g *volumeGen) runningWith(node string, claim *corev1.PersistentVolumeClaim) {
	g.c.existing = append(g.c.existing, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: claim.Namespace, Name: fmt.Sprintf("%srun-%d", g.c.prefix, len(g.c.existing)), UID: g.nextUID()},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main"}},
			Volumes: []corev1.Volume{claimVolume("data", claim.Name)}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	})
}

func claimVolume(name, claim string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
}

// gang replaces the pending pod by n members, each with its own claims
// waiting for their first consumer: a local volume, and in some cases a
// provisioned one.
func (c *volumeCase) gang(n int) []placement.Member {
	g := &volumeGen{gen: gen{r: rand.New(rand.NewPCG(c.seed, 7)), uid: 1 << 20}, c: c}
	provisioned := g.chance(0.5)
	var out []placement.Member
	for i := 0; i < n; i++ {
		p := c.pod.DeepCopy()
		p.Name, p.UID = fmt.Sprintf("%smember-%d", c.prefix, i), types.UID(fmt.Sprintf("member-%d", i))
		p.Spec.Volumes = []corev1.Volume{claimVolume("data", g.claim(fmt.Sprintf("data-%d", i), classLocal, "1Gi").Name)}
		if provisioned {
			p.Spec.Volumes = append(p.Spec.Volumes, claimVolume("scratch", g.claim(fmt.Sprintf("scratch-%d", i), classWFFC, "1Gi").Name))
		}
		out = append(out, placement.Member{Pod: p})
	}
	return out
}

// describe prints a case compactly enough to read in a failure.
func (c *volumeCase) describe() string {
	out := ""
	for _, n := range c.nodes {
		out += fmt.Sprintf("  node %s zone=%q\n", n.Name, n.Labels[corev1.LabelTopologyZone])
	}
	for _, cn := range c.csiNodes {
		out += fmt.Sprintf("  csinode %s limit=%v\n", cn.Name, cn.Spec.Drivers[0].Allocatable)
	}
	out += fmt.Sprintf("  driver storageCapacity=%v; class %s allowedTopologies=%v\n", *c.drivers[0].Spec.StorageCapacity, classWFFC, c.classes[1].AllowedTopologies)
	for _, sc := range c.capacities {
		out += fmt.Sprintf("  capacity %s %v\n", sc.NodeTopology.MatchLabels, sc.Capacity)
	}
	for _, pv := range c.pvs {
		claim := ""
		if pv.Spec.ClaimRef != nil {
			claim = pv.Spec.ClaimRef.Name
		}
		out += fmt.Sprintf("  pv %s class=%q size=%v labels=%v affinity=%v modes=%v claim=%q\n", pv.Name, pv.Spec.StorageClassName, pv.Spec.Capacity.Storage(), pv.Labels, pv.Spec.NodeAffinity, pv.Spec.AccessModes, claim)
	}
	for _, pvc := range c.pvcs {
		out += fmt.Sprintf("  pvc %s class=%v size=%v volume=%q modes=%v\n", pvc.Name, *pvc.Spec.StorageClassName, pvc.Spec.Resources.Requests.Storage(), pvc.Spec.VolumeName, pvc.Spec.AccessModes)
	}
	for _, p := range c.existing {
		out += fmt.Sprintf("  running %s on %s claim=%s\n", p.Name, p.Spec.NodeName, p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName)
	}
	for _, v := range c.pod.Spec.Volumes {
		out += fmt.Sprintf("  pending volume %s: claim=%v ephemeral=%v emptyDir=%v\n", v.Name, v.PersistentVolumeClaim, v.Ephemeral != nil, v.EmptyDir != nil)
	}
	out += fmt.Sprintf("  pending nodeSelector=%v\n", c.pod.Spec.NodeSelector)
	return out
}
