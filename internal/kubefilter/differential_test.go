package kubefilter

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	"k8s.io/utils/ptr"

	"github.com/lockstep-dev/lockstep/internal/dra"
	"github.com/lockstep-dev/lockstep/internal/features"
	"github.com/lockstep-dev/lockstep/internal/placement"
	"github.com/lockstep-dev/lockstep/internal/snapshot"
)

// kubeFilters is kube-scheduler 1.37's default filter chain, in its order,
// without DynamicResources (TestDifferentialDRA adds it).
var kubeFilters = []string{
	names.NodeUnschedulable, names.NodeName, names.NodeDeclaredFeatures, names.TaintToleration, names.NodeAffinity,
	names.NodePorts, names.NodeResourcesFit, names.VolumeRestrictions, names.NodeVolumeLimits,
	names.VolumeBinding, names.VolumeZone, names.PodTopologySpread, names.InterPodAffinity,
}

// diffCases is how many generated cases TestDifferentialLonePod decides;
// LOCKSTEP_DIFF_SEED=<seed> decides just that one.
const diffCases = 2500

// TestDifferentialLonePod decides generated (cluster, existing pods, pending
// pod) cases with Lockstep's placement and with kube-scheduler's own
// framework and plugins, in process, and requires the same feasible nodes
// in every case.
func TestDifferentialLonePod(t *testing.T) {
	ctx := context.Background() // kube-scheduler's plugins log every rejection at V(4)
	kube, lockstep := diffFilters(t, ctx)
	v := &verdicts{test: "TestDifferentialLonePod"}
	for _, seed := range diffSeeds(t, 1000, diffCases) {
		c := generate(seed)
		want, err := kubeVerdicts(ctx, kube, c)
		if err != nil {
			t.Fatalf("seed %d: kube-scheduler: %v", seed, err)
		}
		got, err := lockstepVerdicts(ctx, lockstep, c)
		if err != nil {
			t.Fatalf("seed %d: lockstep: %v", seed, err)
		}
		v.add(t, seed, c.nodes, want, got, c.describe)
	}
	v.done(t)
}

// diffSeeds are the seeds base…base+n-1, or only LOCKSTEP_DIFF_SEED when set.
func diffSeeds(t *testing.T, base, n uint64) []uint64 {
	t.Helper()
	if s := os.Getenv("LOCKSTEP_DIFF_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return []uint64{seed}
	}
	seeds := make([]uint64, 0, n)
	for i := uint64(0); i < n; i++ {
		seeds = append(seeds, base+i)
	}
	return seeds
}

// diffFilters builds kube-scheduler's default filter chain and Lockstep's
// filters over one (empty, fake) cluster's listers with genNamespaces.
func diffFilters(t *testing.T, ctx context.Context) (kube, lockstep *Filters) {
	kube, lockstep, _ = diffFiltersOver(t, ctx)
	return kube, lockstep
}

// diffFiltersOver is diffFilters, also returning the informers' factory
// (whose stores a test may fill).
func diffFiltersOver(t *testing.T, ctx context.Context) (kube, lockstep *Filters, factory informers.SharedInformerFactory) {
	t.Helper()
	client := fake.NewClientset()
	factory = informers.NewSharedInformerFactory(client, 0)
	for _, ns := range genNamespaces {
		if err := factory.Core().V1().Namespaces().Informer().GetIndexer().Add(ns); err != nil {
			t.Fatal(err)
		}
	}
	kube, err := newFilters(ctx, factory, client, kubeFilters)
	if err != nil {
		t.Fatal(err)
	}
	if lockstep, err = New(ctx, factory, client); err != nil {
		t.Fatal(err)
	}
	return kube, lockstep, factory
}

// verdicts tallies one case's node verdicts: kube-scheduler's (want) and
// Lockstep's (got) must agree on every node's feasibility. It reports
// whether the pod fits somewhere, counts kube-scheduler's reasons, and
// prints the first 20 disagreements with the seed that reproduces them.
type verdicts struct {
	test                           string
	cases, feasible, disagreements int
	reasons                        map[string]int
}

func (v *verdicts) add(t *testing.T, seed uint64, nodes []*corev1.Node, want, got map[string]string, describe func() string) {
	t.Helper()
	v.cases++
	somewhere := false
	for _, n := range nodes {
		if (want[n.Name] == "") != (got[n.Name] == "") {
			v.disagreements++
			if v.disagreements <= 20 {
				t.Errorf("seed %d (reproduce: LOCKSTEP_DIFF_SEED=%d go test ./internal/kubefilter -run %s -v): node %s: kube-scheduler %q, lockstep %q\n%s", seed, seed, v.test, n.Name, orFits(want[n.Name]), orFits(got[n.Name]), describe())
			}
		}
		somewhere = somewhere || want[n.Name] == ""
		if v.reasons != nil {
			v.reasons[caseName.ReplaceAllString(want[n.Name], `"…"`)]++
		}
	}
	if somewhere {
		v.feasible++
	}
}

// done logs the tally and fails a lopsided generator: unless most cases
// are feasible somewhere and most are not, the agreement says nothing.
func (v *verdicts) done(t *testing.T) {
	t.Helper()
	t.Logf("%d cases, %d feasible somewhere, %d node disagreements", v.cases, v.feasible, v.disagreements)
	if v.reasons != nil {
		t.Logf("kube-scheduler's verdicts per node: %v", v.reasons)
	}
	if v.cases > 1 && (v.feasible < v.cases/5 || v.feasible > v.cases*4/5) {
		t.Errorf("generator is lopsided: %d of %d cases feasible somewhere", v.feasible, v.cases)
	}
}

func orFits(r string) string {
	if r == "" {
		return "fits"
	}
	return r
}

func kubeVerdicts(ctx context.Context, f *Filters, c *genCase) (map[string]string, error) {
	ks, err := newKubeSearch(ctx, f, c)
	if err != nil {
		return nil, err
	}
	kc := ks.prefilter(c.pod)
	out := map[string]string{}
	for _, n := range c.nodes {
		ok, why, err := ks.filter(kc, c.pod, n.Name)
		if err != nil {
			return nil, err
		}
		out[n.Name] = ""
		if !ok {
			out[n.Name] = why
		}
	}
	return out, nil
}

func lockstepVerdicts(ctx context.Context, f *Filters, c *genCase) (map[string]string, error) {
	snap := snapshot.New(snapshot.Input{Features: features.Default(), Nodes: c.nodes, Pods: c.existing})
	snap.Constraints = f.NewView(c.nodes, c.existing)
	return placement.NodeVerdicts(ctx, snap, dra.New(snap, dra.NewCache()), placement.Member{Pod: c.pod})
}

// The generator. Values are drawn from small sets so that the cases collide:
// labels that match selectors, ports that conflict, taints that are or are
// not tolerated, requests just above and below what is left.

var genNamespaces = []*corev1.Namespace{
	{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"team": "a"}}},
	{ObjectMeta: metav1.ObjectMeta{Name: "team-b", Labels: map[string]string{"team": "b"}}},
}

type genCase struct {
	seed     uint64
	nodes    []*corev1.Node
	existing []*corev1.Pod
	pod      *corev1.Pod
}

type gen struct {
	r   *rand.Rand
	uid int
}

func (g *gen) chance(p float64) bool { return g.r.Float64() < p }
func (g *gen) pick(xs ...string) string {
	return xs[g.r.IntN(len(xs))]
}
func (g *gen) nextUID() types.UID { g.uid++; return types.UID(fmt.Sprintf("uid-%d", g.uid)) }

func generate(seed uint64) *genCase {
	g := &gen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	c := &genCase{seed: seed}
	for i := 0; i < 1+g.r.IntN(4); i++ {
		c.nodes = append(c.nodes, g.node(i))
	}
	for _, n := range c.nodes {
		for j := 0; j < g.r.IntN(4); j++ {
			p := g.pod(fmt.Sprintf("run-%s-%d", n.Name, j), true)
			p.Spec.NodeName = n.Name
			if g.chance(0.1) {
				p.Status.Phase = corev1.PodSucceeded // holds nothing
			}
			c.existing = append(c.existing, p)
		}
	}
	c.pod = g.pod("pending", false)
	return c
}

func (g *gen) node(i int) *corev1.Node {
	name := fmt.Sprintf("node-%d", i)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: g.nextUID(), Labels: map[string]string{corev1.LabelHostname: name}}}
	if g.chance(0.85) {
		n.Labels[corev1.LabelTopologyZone] = g.pick("zone-a", "zone-b")
	}
	if g.chance(0.5) {
		n.Labels["disk"] = g.pick("ssd", "hdd")
	}
	if g.chance(0.3) {
		n.Labels["gpus"] = g.pick("1", "2", "4", "8")
	}
	n.Status.Allocatable = corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(g.pick("2", "4", "8")),
		corev1.ResourceMemory: resource.MustParse(g.pick("4Gi", "8Gi", "16Gi")),
		corev1.ResourcePods:   resource.MustParse(g.pick("3", "5", "110")),
	}
	if g.chance(0.3) {
		n.Status.Allocatable["example.com/foo"] = resource.MustParse(g.pick("1", "2"))
	}
	if g.chance(0.3) {
		n.Status.Allocatable[corev1.ResourceEphemeralStorage] = resource.MustParse(g.pick("1Gi", "10Gi"))
	}
	n.Status.Capacity = n.Status.Allocatable.DeepCopy()
	if g.chance(0.15) {
		n.Spec.Unschedulable = true
	}
	if g.chance(0.4) {
		n.Status.DeclaredFeatures = []string{"RestartAllContainersOnContainerExits"}
	}
	for j := 0; j < g.r.IntN(3); j++ {
		if g.chance(0.5) {
			n.Spec.Taints = append(n.Spec.Taints, g.taint())
		}
	}
	return n
}

func (g *gen) taint() corev1.Taint {
	t := corev1.Taint{Key: g.pick("k1", "k2"), Value: g.pick("", "v1", "v2"),
		Effect: corev1.TaintEffect(g.pick(string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute)))}
	return t
}

func (g *gen) pod(name string, running bool) *corev1.Pod {
	ns := g.pick("team-a", "team-b")
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: g.nextUID(), Labels: map[string]string{}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: g.requests()}}},
		},
	}
	if g.chance(0.8) {
		p.Labels["app"] = g.pick("web", "db")
	}
	if g.chance(0.3) {
		p.Labels["tier"] = g.pick("front", "back")
	}
	if g.chance(0.25) {
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{g.port()}
	}
	if g.chance(0.25) {
		init := corev1.Container{Name: "init", Resources: corev1.ResourceRequirements{Requests: g.requests()}}
		if g.chance(0.5) {
			init.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways) // a sidecar
			if g.chance(0.4) {
				init.Ports = []corev1.ContainerPort{g.port()}
			}
		}
		p.Spec.InitContainers = []corev1.Container{init}
	}
	if g.chance(0.15) {
		p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(g.pick("100m", "500m"))}
	}
	if g.chance(0.1) {
		p.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(g.pick("1", "3")), corev1.ResourceMemory: resource.MustParse("1Gi")}}
	}
	if g.chance(0.25) {
		p.Spec.Affinity = &corev1.Affinity{}
		if g.chance(0.5) {
			p.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{g.podTerm()}}
		}
		if g.chance(0.5) {
			p.Spec.Affinity.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{g.podTerm()}}
		}
	}
	if running {
		return p
	}
	// What only matters for the pod being scheduled.
	if g.chance(0.3) {
		p.Spec.NodeSelector = map[string]string{}
		switch g.r.IntN(3) {
		case 0:
			p.Spec.NodeSelector["disk"] = g.pick("ssd", "hdd")
		case 1:
			p.Spec.NodeSelector[corev1.LabelTopologyZone] = g.pick("zone-a", "zone-b")
		default:
			p.Spec.NodeSelector[corev1.LabelHostname] = g.pick("node-0", "node-1", "node-2")
		}
	}
	if g.chance(0.3) {
		if p.Spec.Affinity == nil {
			p.Spec.Affinity = &corev1.Affinity{}
		}
		p.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: g.nodeSelector()}
	}
	for i := 0; i < g.r.IntN(3); i++ {
		p.Spec.Tolerations = append(p.Spec.Tolerations, g.toleration())
	}
	if g.chance(0.3) {
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, g.spread())
	}
	if g.chance(0.05) {
		p.Spec.NodeName = g.pick("node-0", "node-1")
	}
	if g.chance(0.15) {
		// Needs nodes that declare RestartAllContainersOnContainerExits.
		p.Spec.Containers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyNever)
		p.Spec.Containers[0].RestartPolicyRules = []corev1.ContainerRestartRule{{
			Action:    corev1.ContainerRestartRuleActionRestartAllContainers,
			ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}},
		}}
	}
	return p
}

func (g *gen) requests() corev1.ResourceList {
	r := corev1.ResourceList{}
	if g.chance(0.9) {
		r[corev1.ResourceCPU] = resource.MustParse(g.pick("100m", "500m", "1", "2", "3", "5"))
	}
	if g.chance(0.7) {
		r[corev1.ResourceMemory] = resource.MustParse(g.pick("256Mi", "1Gi", "3Gi", "6Gi"))
	}
	if g.chance(0.15) {
		r["example.com/foo"] = resource.MustParse("1")
	}
	if g.chance(0.1) {
		r[corev1.ResourceEphemeralStorage] = resource.MustParse(g.pick("500Mi", "5Gi"))
	}
	return r
}

func (g *gen) port() corev1.ContainerPort {
	cp := corev1.ContainerPort{ContainerPort: 80, HostPort: int32(g.pick2(8080, 9090))}
	if g.chance(0.3) {
		cp.Protocol = corev1.ProtocolUDP
	}
	if g.chance(0.3) {
		cp.HostIP = g.pick("127.0.0.1", "10.0.0.1")
	}
	return cp
}

func (g *gen) pick2(a, b int) int {
	if g.chance(0.5) {
		return a
	}
	return b
}

func (g *gen) labelSelector() *metav1.LabelSelector {
	if g.chance(0.7) {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": g.pick("web", "db")}}
	}
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOperator(g.pick("In", "NotIn", "Exists", "DoesNotExist")), Values: g.values("front", "back")}}}
}

func (g *gen) values(vals ...string) []string { return []string{vals[g.r.IntN(len(vals))]} }

func (g *gen) podTerm() corev1.PodAffinityTerm {
	t := corev1.PodAffinityTerm{LabelSelector: g.labelSelector(), TopologyKey: g.pick(corev1.LabelHostname, corev1.LabelTopologyZone)}
	switch g.r.IntN(4) {
	case 0:
		t.Namespaces = []string{g.pick("team-a", "team-b")}
	case 1:
		t.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": g.pick("a", "b")}}
	}
	for _, fix := range []*metav1.LabelSelector{t.LabelSelector} {
		for i := range fix.MatchExpressions {
			if op := fix.MatchExpressions[i].Operator; op == metav1.LabelSelectorOpExists || op == metav1.LabelSelectorOpDoesNotExist {
				fix.MatchExpressions[i].Values = nil
			}
		}
	}
	return t
}

func (g *gen) nodeSelector() *corev1.NodeSelector {
	ns := &corev1.NodeSelector{}
	for i := 0; i < 1+g.r.IntN(2); i++ {
		var term corev1.NodeSelectorTerm
		switch g.r.IntN(4) {
		case 0:
			term.MatchExpressions = []corev1.NodeSelectorRequirement{{Key: "disk", Operator: corev1.NodeSelectorOperator(g.pick("In", "NotIn")), Values: g.values("ssd", "hdd")}}
		case 1:
			term.MatchExpressions = []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOperator(g.pick("Exists", "DoesNotExist"))}}
		case 2:
			term.MatchExpressions = []corev1.NodeSelectorRequirement{{Key: "gpus", Operator: corev1.NodeSelectorOperator(g.pick("Gt", "Lt")), Values: g.values("1", "2", "4")}}
		default:
			term.MatchFields = []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOperator(g.pick("In", "NotIn")), Values: g.values("node-0", "node-1", "node-2")}}
		}
		ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, term)
	}
	return ns
}

func (g *gen) toleration() corev1.Toleration {
	t := corev1.Toleration{Key: g.pick("k1", "k2", "")}
	if t.Key == "" || g.chance(0.4) {
		t.Operator = corev1.TolerationOpExists
	} else {
		t.Operator = corev1.TolerationOpEqual
		t.Value = g.pick("", "v1", "v2")
	}
	if g.chance(0.6) {
		t.Effect = corev1.TaintEffect(g.pick(string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectNoExecute)))
	}
	if t.Key == "" && t.Effect == "" && g.chance(0.5) {
		t.Key = "k1"
	}
	return t
}

func (g *gen) spread() corev1.TopologySpreadConstraint {
	c := corev1.TopologySpreadConstraint{
		MaxSkew:           int32(1 + g.r.IntN(2)),
		TopologyKey:       g.pick(corev1.LabelHostname, corev1.LabelTopologyZone),
		WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": g.pick("web", "db")}},
	}
	if g.chance(0.15) {
		c.WhenUnsatisfiable = corev1.ScheduleAnyway
	}
	if g.chance(0.3) {
		c.MinDomains = ptr.To(int32(2 + g.r.IntN(2)))
		c.WhenUnsatisfiable = corev1.DoNotSchedule
	}
	if g.chance(0.3) {
		c.NodeAffinityPolicy = ptr.To(corev1.NodeInclusionPolicy(g.pick(string(corev1.NodeInclusionPolicyHonor), string(corev1.NodeInclusionPolicyIgnore))))
	}
	if g.chance(0.3) {
		c.NodeTaintsPolicy = ptr.To(corev1.NodeInclusionPolicy(g.pick(string(corev1.NodeInclusionPolicyHonor), string(corev1.NodeInclusionPolicyIgnore))))
	}
	if g.chance(0.2) {
		c.MatchLabelKeys = []string{"tier"}
	}
	return c
}

// describe prints a case compactly enough to read in a failure.
func (c *genCase) describe() string {
	out := ""
	for _, n := range c.nodes {
		keys := make([]string, 0, len(n.Labels))
		for k, v := range n.Labels {
			keys = append(keys, k+"="+v)
		}
		sort.Strings(keys)
		out += fmt.Sprintf("  node %s labels=%v alloc=%v unschedulable=%v taints=%v\n", n.Name, keys, n.Status.Allocatable, n.Spec.Unschedulable, n.Spec.Taints)
	}
	for _, p := range c.existing {
		out += fmt.Sprintf("  existing %s/%s on %s phase=%q labels=%v requests=%v affinity=%v\n", p.Namespace, p.Name, p.Spec.NodeName, p.Status.Phase, p.Labels, p.Spec.Containers[0].Resources.Requests, p.Spec.Affinity)
	}
	p := c.pod
	out += fmt.Sprintf("  pending %s/%s labels=%v nodeName=%q requests=%v init=%d overhead=%v podResources=%v ports=%v selector=%v affinity=%v tolerations=%v spread=%v\n",
		p.Namespace, p.Name, p.Labels, p.Spec.NodeName, p.Spec.Containers[0].Resources.Requests, len(p.Spec.InitContainers), p.Spec.Overhead, p.Spec.Resources, p.Spec.Containers[0].Ports, p.Spec.NodeSelector, p.Spec.Affinity, p.Spec.Tolerations, p.Spec.TopologySpreadConstraints)
	return out
}

// TestDifferentialGang does the same for gangs of 2–4 identical members: a
// placement Lockstep finds must pass kube-scheduler's filters member by
// member (each member seeing the ones placed before it as existing pods),
// and when Lockstep finds none, an exhaustive search with kube-scheduler's
// filters must find none either.
func TestDifferentialGang(t *testing.T) {
	ctx := context.Background()
	kube, lockstep := diffFilters(t, ctx)
	const cases = 1000
	placed, failures := 0, 0
	for seed := uint64(50000); seed < 50000+cases; seed++ {
		c := generate(seed)
		// Members small enough that several share a node, so that
		// placements exist and the constraints between members decide.
		c.pod.Spec.NodeName = ""
		c.pod.Spec.Resources = nil
		c.pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse([]string{"100m", "500m", "1"}[seed%3])}
		size := 2 + int(seed%3)
		var members []placement.Member
		for i := 0; i < size; i++ {
			p := c.pod.DeepCopy()
			p.Name, p.UID = fmt.Sprintf("member-%d", i), types.UID(fmt.Sprintf("member-%d", i))
			members = append(members, placement.Member{Pod: p})
		}
		snap := snapshot.New(snapshot.Input{Features: features.Default(), Nodes: c.nodes, Pods: c.existing})
		snap.Constraints = lockstep.NewView(c.nodes, c.existing)
		res, err := placement.Place(ctx, snap, dra.New(snap, dra.NewCache()), placement.Unit{Members: members, MinCount: size, Gang: true})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		ks, err := newKubeSearch(ctx, kube, c)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
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
					t.Errorf("seed %d: Lockstep put member %d of %d on %s, kube-scheduler refuses it there: %s\n%s", seed, i, size, a.Node, why, c.describe())
					break
				}
				if err := ks.add(a.Pod, a.Node); err != nil {
					t.Fatal(err)
				}
			}
			continue
		}
		if nodes, err := ks.search(members, 0, nil); err != nil {
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

// kubeSearch evaluates members one by one on kube-scheduler's snapshot.
type kubeSearch struct {
	ctx  context.Context
	f    *Filters
	snap *cache.Snapshot
	c    *genCase
}

func newKubeSearch(ctx context.Context, f *Filters, c *genCase) (*kubeSearch, error) {
	var held []*corev1.Pod
	for _, p := range c.existing {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			held = append(held, p)
		}
	}
	snap := cache.NewSnapshot(held, c.nodes)
	if err := snap.StartMutations(); err != nil {
		return nil, err
	}
	return &kubeSearch{ctx: ctx, f: f, snap: snap, c: c}, nil
}

// kubeCheck is kube-scheduler's PreFilter outcome for one pod.
type kubeCheck struct {
	state *framework.CycleState
	res   *fwk.PreFilterResult
	st    *fwk.Status
}

func (k *kubeSearch) prefilter(pod *corev1.Pod) kubeCheck {
	k.f.lister.SharedLister = k.snap
	state := framework.NewCycleState()
	res, st, _ := k.f.fw.RunPreFilterPlugins(k.ctx, state, pod)
	return kubeCheck{state: state, res: res, st: st}
}

// filter is kube-scheduler's verdict for pod on node after kc's PreFilter.
func (k *kubeSearch) filter(kc kubeCheck, pod *corev1.Pod, node string) (bool, string, error) {
	switch {
	case kc.st.IsRejected():
		return false, reason(kc.st), nil
	case !kc.st.IsSuccess():
		return false, "", kc.st.AsError()
	case !kc.res.AllNodes() && !kc.res.NodeNames.Has(node):
		return false, "excluded by PreFilter", nil
	}
	ni, err := k.snap.Get(node)
	if err != nil {
		return false, "", err
	}
	fs := k.f.fw.RunFilterPlugins(k.ctx, kc.state, pod, ni)
	if !fs.IsSuccess() && !fs.IsRejected() {
		return false, "", fs.AsError()
	}
	return fs.IsSuccess(), reason(fs), nil
}

// fits runs PreFilter and Filter for pod on node against the pods held now.
func (k *kubeSearch) fits(pod *corev1.Pod, node string) (bool, string, error) {
	return k.filter(k.prefilter(pod), pod, node)
}

func (k *kubeSearch) add(pod *corev1.Pod, node string) error {
	cp := pod.DeepCopy()
	cp.Spec.NodeName = node
	pi, err := framework.NewPodInfo(cp)
	if err != nil {
		return err
	}
	return k.snap.AddPod(pi, node)
}

func (k *kubeSearch) remove(pod *corev1.Pod, node string) error {
	return k.snap.RemovePod(klog.Background(), pod, node)
}

// search returns nodes for members[i:] given those placed, or nil.
func (k *kubeSearch) search(members []placement.Member, i int, placed []string) ([]string, error) {
	if i == len(members) {
		return placed, nil
	}
	for _, n := range k.c.nodes {
		ok, _, err := k.fits(members[i].Pod, n.Name)
		if err != nil || !ok {
			if err != nil {
				return nil, err
			}
			continue
		}
		if err := k.add(members[i].Pod, n.Name); err != nil {
			return nil, err
		}
		got, err := k.search(members, i+1, append(placed, n.Name))
		if rerr := k.remove(members[i].Pod, n.Name); rerr != nil {
			return nil, rerr
		}
		if err != nil || got != nil {
			return got, err
		}
	}
	return nil, nil
}
