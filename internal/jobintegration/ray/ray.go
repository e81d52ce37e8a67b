// Package ray is the KubeRay (ray.io/v1) integration: RayCluster and
// RayJob. A Ray cluster is a head and worker groups; the KubeRay operator
// creates their pods itself, controlled by the RayCluster (which a RayJob
// controls when it made the cluster) and labelled with their group.
//
// A cluster whose worker groups may run below their size is a scheduling
// tree named after the RayCluster (or the RayJob): a root
// CompositePodGroup that needs every child, the head's PodGroup
// (<name>-head, minCount 1) and one PodGroup per worker group
// (<name>-<group>) with its minimum (minReplicas × numOfHosts; a group of
// minimum 0 is basic and counts with none of its pods placed). The head is
// never left out: no worker binds until the head does with it. Workers
// beyond the minimum (replicas above minReplicas, or the autoscaler's)
// join the admitted tree as they fit, as the autoscaler expects. A
// cluster none of whose groups can run above its minimum, or the min-count
// annotation, or more than 7 worker groups (a tree level holds 8), makes
// one flat gang of all its pods, its minCount the head plus each worker
// group's minimum. A suspended worker group counts no pods.
package ray

import (
	"context"
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
)

// Pod labels the KubeRay operator sets.
const (
	nodeTypeLabel = "ray.io/node-type"
	groupLabel    = "ray.io/group"
	clusterLabel  = "ray.io/cluster"
)

// roleHead is the head's role; the workers' roles are their groups' names.
const roleHead = "head"

var (
	clusterGVK = rayv1.GroupVersion.WithKind("RayCluster")
	jobGVK     = rayv1.GroupVersion.WithKind("RayJob")
)

// Cluster is the RayCluster integration.
type Cluster struct{}

// Job is the RayJob integration.
type Job struct{}

var (
	_ jobintegration.Integration         = Cluster{}
	_ jobintegration.PodAdmissionMatcher = Cluster{}
	_ jobintegration.Integration         = Job{}
)

// Name implements Integration.
func (Cluster) Name() string { return "ray.io/raycluster" }

// GVK implements Integration.
func (Cluster) GVK() schema.GroupVersionKind { return clusterGVK }

// Resource implements Integration.
func (Cluster) Resource() string { return "rayclusters" }

// Aliases implements Integration.
func (Cluster) Aliases() []string { return []string{"raycluster", "rayclusters"} }

// NewObject implements Integration.
func (Cluster) NewObject() client.Object { return &rayv1.RayCluster{} }

// Wrap implements Integration.
func (Cluster) Wrap(o client.Object) jobintegration.GenericJob {
	c := o.(*rayv1.RayCluster)
	return &RayCluster{obj: c, shape: shape{spec: &c.Spec, path: field.NewPath("spec")}}
}

// AddToScheme implements Integration.
func (Cluster) AddToScheme(s *runtime.Scheme) error { return rayv1.AddToScheme(s) }

// AdmissionMatch implements Integration: the head's pods target Lockstep.
func (Cluster) AdmissionMatch() string { return headMatch("object.spec") }

func headMatch(spec string) string {
	t := spec + ".headGroupSpec.template"
	return `has(` + t + `.spec) && has(` + t + `.spec.schedulerName) && ` + t + `.spec.schedulerName == "` + lockv1.SchedulerName + `"`
}

// PodAdmissionMatch implements PodAdmissionMatcher: the cluster's pods, which the operator creates
// itself (a RayJob's too: its cluster's).
func (Cluster) PodAdmissionMatch() string { return jobintegration.ControlledByMatch(clusterGVK) }

// OwnerOf implements Integration: the pod's controller, when it is a
// RayCluster.
func (Cluster) OwnerOf(_ context.Context, _ jobintegration.Getter, pod *corev1.Pod) (string, types.UID, error) {
	if pod.Labels[clusterLabel] == "" {
		return "", "", nil
	}
	if ref, ok := jobintegration.ControllerOf(pod, clusterGVK); ok {
		return ref.Name, ref.UID, nil
	}
	return "", "", nil
}

// Name implements Integration.
func (Job) Name() string { return "ray.io/rayjob" }

// GVK implements Integration.
func (Job) GVK() schema.GroupVersionKind { return jobGVK }

// Resource implements Integration.
func (Job) Resource() string { return "rayjobs" }

// Aliases implements Integration.
func (Job) Aliases() []string { return []string{"rayjob", "rayjobs"} }

// NewObject implements Integration.
func (Job) NewObject() client.Object { return &rayv1.RayJob{} }

// Wrap implements Integration.
func (Job) Wrap(o client.Object) jobintegration.GenericJob {
	j := o.(*rayv1.RayJob)
	return &RayJob{obj: j, shape: shape{spec: j.Spec.RayClusterSpec, path: field.NewPath("spec", "rayClusterSpec")}}
}

// AddToScheme implements Integration.
func (Job) AddToScheme(s *runtime.Scheme) error { return rayv1.AddToScheme(s) }

// AdmissionMatch implements Integration: the cluster it creates has a head
// whose pods target Lockstep.
func (Job) AdmissionMatch() string {
	return `has(object.spec.rayClusterSpec) && ` + headMatch("object.spec.rayClusterSpec")
}

// OwnerOf implements Integration: the pod's RayCluster, when a RayJob
// controls it.
func (Job) OwnerOf(ctx context.Context, get jobintegration.Getter, pod *corev1.Pod) (string, types.UID, error) {
	if pod.Labels[clusterLabel] == "" {
		return "", "", nil
	}
	return jobintegration.OwnerVia(ctx, get, pod, clusterGVK, &rayv1.RayCluster{}, jobGVK)
}

// shape is a Ray cluster's spec, read the same way for both kinds.
type shape struct {
	spec *rayv1.RayClusterSpec
	path *field.Path
}

// Roles are the head and one role per worker group, each with the pods
// the operator keeps: clamp(replicas, minReplicas, maxReplicas) ×
// numOfHosts (none for a suspended group).
func (s shape) Roles() []jobintegration.Role {
	if s.spec == nil {
		return nil
	}
	roles := []jobintegration.Role{{Name: roleHead, Template: &s.spec.HeadGroupSpec.Template, Count: 1, Path: s.path.Child("headGroupSpec", "template")}}
	for i := range s.spec.WorkerGroupSpecs {
		g := &s.spec.WorkerGroupSpecs[i]
		roles = append(roles, jobintegration.Role{Name: g.GroupName, Template: &g.Template, Count: desired(g) * hosts(g), Path: s.path.Child("workerGroupSpecs").Index(i).Child("template")})
	}
	return roles
}

func hosts(g *rayv1.WorkerGroupSpec) int32 { return max(g.NumOfHosts, 1) }

func suspended(g *rayv1.WorkerGroupSpec) bool { return g.Suspend != nil && *g.Suspend }

func minReplicas(g *rayv1.WorkerGroupSpec) int32 {
	if g.MinReplicas == nil {
		return 0
	}
	return *g.MinReplicas
}

// desired is the operator's count of a group's replicas.
func desired(g *rayv1.WorkerGroupSpec) int32 {
	if suspended(g) {
		return 0
	}
	n, lo, hi := int32(0), minReplicas(g), int32(math.MaxInt32)
	if g.Replicas != nil {
		n = *g.Replicas
	}
	if g.MaxReplicas != nil {
		hi = *g.MaxReplicas
	}
	if lo > hi {
		return hi
	}
	return min(max(n, lo), hi)
}

// RoleOf is the head, or the worker group the operator labels a pod with.
func (s shape) RoleOf(pod *corev1.Pod) string {
	if pod.Labels[nodeTypeLabel] == "head" {
		return roleHead
	}
	return pod.Labels[groupLabel]
}

// KindMinCount is the head and every worker group's minimum.
func (s shape) KindMinCount() (int32, bool) {
	if s.spec == nil {
		return 0, false
	}
	n := int32(1)
	for i := range s.spec.WorkerGroupSpecs {
		if g := &s.spec.WorkerGroupSpecs[i]; !suspended(g) {
			n += min(minReplicas(g), desired(g)) * hosts(g)
		}
	}
	return n, true
}

// RoleMinCounts is the head (always 1) and each worker group's minimum
// (minReplicas × numOfHosts, none for a suspended group): a tree whenever a
// worker group may run more pods than its minimum (minReplicas below
// maxReplicas, or no maxReplicas), so its workers never stand in for the
// head; when no group can, the one flat gang of all. The shape follows
// the spec's bounds, not its replicas, so scaling never changes it.
func (s shape) RoleMinCounts() (map[string]int32, bool) {
	if s.spec == nil {
		return nil, false
	}
	mins := map[string]int32{roleHead: 1}
	tree := false
	for i := range s.spec.WorkerGroupSpecs {
		g := &s.spec.WorkerGroupSpecs[i]
		n := int32(0)
		if !suspended(g) {
			n = min(minReplicas(g), desired(g)) * hosts(g)
		}
		mins[g.GroupName] = n
		tree = tree || g.MaxReplicas == nil || minReplicas(g) < *g.MaxReplicas
	}
	return mins, tree
}

// tooManyGroups refuses a job whose worker groups may run below their
// replicas (a tree: the head's PodGroup beside one per worker group) when
// the tree would have more children than a CompositePodGroup holds: as
// one flat gang of its minimum it could start with workers and no head.
// A job whose shape the min-count or gang-scope annotation chose is not a
// tree and is left as written.
func (s shape) tooManyGroups(j jobintegration.GenericJob) field.ErrorList {
	ann := j.Object().GetAnnotations()
	if _, set := ann[jobintegration.MinCountAnnotation]; set || jobintegration.Scope(j) == jobintegration.ScopeRole {
		return nil
	}
	if _, tree := s.RoleMinCounts(); !tree || len(s.spec.WorkerGroupSpecs)+1 <= lockv1.MaxChildren {
		return nil
	}
	return field.ErrorList{field.Invalid(s.path.Child("workerGroupSpecs"), len(s.spec.WorkerGroupSpecs), fmt.Sprintf(
		"%d worker groups may run below their replicas: Lockstep keeps the head in the gang through a scheduling tree of the head and each worker group, at most %d children (%d worker groups), and as one flat gang of its minimum the cluster could start with workers and no head; merge worker groups, or give every group minReplicas equal to maxReplicas (one gang of every pod)",
		len(s.spec.WorkerGroupSpecs), lockv1.MaxChildren, lockv1.MaxChildren-1))}
}

// qualify: head and workers target the same scheduler, group names are
// unique roles, and no template names another group.
func (s shape) qualify(own string) *jobintegration.NotQualified {
	roles := s.Roles()
	head := roles[0].Template.Spec.SchedulerName
	seen := map[string]bool{}
	for _, r := range roles {
		if sn := r.Template.Spec.SchedulerName; sn != head {
			return &jobintegration.NotQualified{
				Condition: fmt.Sprintf("worker group %s's pods name scheduler %q, the head's %q", r.Name, sn, head),
				Fix:       "set schedulerName: " + lockv1.SchedulerName + " on the head's and every worker group's pod template",
			}
		}
		if seen[r.Name] {
			return &jobintegration.NotQualified{Condition: fmt.Sprintf("two groups are named %q", r.Name), Fix: "give each worker group its own groupName (not \"head\")"}
		}
		seen[r.Name] = true
		if jobintegration.HasRoleGroup(r.Template, own, r.Name) {
			return jobintegration.GroupNamed("the "+r.Name+" pod template", r.Template)
		}
	}
	return nil
}

// RayCluster adapts a RayCluster.
type RayCluster struct {
	obj *rayv1.RayCluster
	shape
}

var (
	_ jobintegration.GenericJob     = (*RayCluster)(nil)
	_ jobintegration.MinCounter     = (*RayCluster)(nil)
	_ jobintegration.RoleMinCounter = (*RayCluster)(nil)
)

// Object implements GenericJob.
func (c *RayCluster) Object() client.Object { return c.obj }

// GVK implements GenericJob.
func (c *RayCluster) GVK() schema.GroupVersionKind { return clusterGVK }

// Qualify implements GenericJob.
func (c *RayCluster) Qualify() *jobintegration.NotQualified { return c.qualify(c.obj.Name) }

// ValidateFields implements FieldValidator.
func (c *RayCluster) ValidateFields() field.ErrorList { return c.tooManyGroups(c) }

// Stopped implements GenericJob: a RayCluster runs until deleted or
// suspended.
func (c *RayCluster) Stopped() (string, bool, bool) {
	if c.obj.Spec.Suspend != nil && *c.obj.Spec.Suspend {
		return "suspended", false, true
	}
	return "", false, false
}

// RayJob adapts a RayJob.
type RayJob struct {
	obj *rayv1.RayJob
	shape
}

var (
	_ jobintegration.GenericJob      = (*RayJob)(nil)
	_ jobintegration.MinCounter      = (*RayJob)(nil)
	_ jobintegration.RoleMinCounter  = (*RayJob)(nil)
	_ jobintegration.RestartBudgeter = (*RayJob)(nil)
)

// DefaultRestartBudget implements RestartBudgeter: nothing to change —
// KubeRay has no setting that makes a lost head free (below).
func (j *RayJob) DefaultRestartBudget() []string { return nil }

// RestartBudgetWarnings implements RestartBudgeter: KubeRay does not
// recreate the head of a cluster a RayJob created once it is provisioned,
// so a gang restart (which takes the head down with the workers) ends the
// job's run: the RayJob fails, or retries on a new RayCluster while
// spec.backoffLimit allows. A RayCluster of its own recreates every pod,
// which costs it nothing.
func (j *RayJob) RestartBudgetWarnings() []string {
	if j.spec == nil {
		return nil
	}
	limit := ptr.Deref(j.obj.Spec.BackoffLimit, 0)
	cost := "fails the RayJob (spec.backoffLimit is 0)"
	if limit > 0 {
		cost = fmt.Sprintf("costs the RayJob one of its %d retries (spec.backoffLimit), each on a new RayCluster", limit)
	}
	return []string{"KubeRay does not recreate the head pod of the cluster a RayJob creates, so a gang restart or preemption, which takes the head down with the workers, " + cost + "; set spec.backoffLimit to the restarts you allow (docs/integrations.md)"}
}

// Object implements GenericJob.
func (j *RayJob) Object() client.Object { return j.obj }

// GVK implements GenericJob.
func (j *RayJob) GVK() schema.GroupVersionKind { return jobGVK }

// ValidateFields implements FieldValidator.
func (j *RayJob) ValidateFields() field.ErrorList {
	if j.spec == nil {
		return nil
	}
	return j.tooManyGroups(j)
}

// Qualify implements GenericJob: the RayJob creates its cluster.
func (j *RayJob) Qualify() *jobintegration.NotQualified {
	if j.spec == nil {
		return &jobintegration.NotQualified{Condition: "it runs on an existing RayCluster (clusterSelector)", Fix: "make that RayCluster a gang, or give the RayJob a rayClusterSpec"}
	}
	return j.qualify(j.obj.Name)
}

// Stopped implements GenericJob.
func (j *RayJob) Stopped() (string, bool, bool) {
	if j.obj.Spec.Suspend {
		return "suspended", false, true
	}
	switch s := j.obj.Status.JobDeploymentStatus; s {
	case rayv1.JobDeploymentStatusComplete:
		return "complete", false, false
	case rayv1.JobDeploymentStatusFailed, rayv1.JobDeploymentStatusValidationFailed:
		return "failed: " + string(j.obj.Status.Reason), true, false
	}
	return "", false, false
}
