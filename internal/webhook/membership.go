package webhook

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/integrations"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// indexGroupMembers indexes the webhook's pod informer by PodGroup
// ("<namespace>/<group>"): reads.members answers from it.
const indexGroupMembers = "lockstep.dev/group-members"

// memberIndex is a pod informer's indexer (indexGroupMembers among its
// indexes).
type memberIndex interface {
	ByIndex(indexName, indexedValue string) ([]any, error)
}

var labelPath = field.NewPath("metadata", "labels").Key(lockv1.PodGroupLabel)

// reads are the webhook's lookups: the manager's caches first; Live (the
// API server) only when a cache misses an object that a pod's creation
// implies exists (its Job, created just before it); Members, the pod
// cache's index of group members.
type reads struct {
	Cached  client.Reader
	Live    client.Reader
	Members memberIndex
}

// Get implements jobintegration.Getter: the cache, or on a miss the API
// server (a job's first pods follow it within milliseconds).
func (r reads) Get(ctx context.Context, key types.NamespacedName, obj client.Object) error {
	err := r.Cached.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) && r.Live != nil {
		err = r.Live.Get(ctx, key, obj)
	}
	return err
}

// integrationSet are the integrations whose jobs the webhook admits.
var integrationSet = integrations.All()

// ownerJob is the job a pod belongs to (through the integrations), read,
// or nil when it has none or it no longer exists.
func (r reads) ownerJob(ctx context.Context, ns string, pod *corev1.Pod) (*jobintegration.Owner, jobintegration.GenericJob, error) {
	if pod.Namespace != ns {
		cp := *pod
		cp.Namespace = ns
		pod = &cp
	}
	owner, err := integrationSet.OwnerOf(ctx, r, pod)
	if err != nil || owner == nil {
		return owner, nil, err
	}
	obj := owner.Integration.NewObject()
	if err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: owner.Name}, obj); err != nil {
		return owner, nil, client.IgnoreNotFound(err)
	}
	if obj.GetUID() != owner.UID {
		return owner, nil, nil
	}
	return owner, owner.Integration.Wrap(obj), nil
}

// groupOf is the group a pod of j joins: the one Lockstep makes for its
// role when j is a gang (then gang is true), else the one the role's
// template names.
func groupOf(j jobintegration.GenericJob, pod *corev1.Pod) (g string, gang bool) {
	if c := integrationSet.Classify(j); c.Class == jobintegration.ClassGang {
		return jobintegration.GroupOf(j, c.Groups, pod), true
	}
	if r, ok := roleNamed(j, j.RoleOf(pod)); ok {
		return r.Template.Labels[lockv1.PodGroupLabel], false
	}
	return "", false
}

func (r reads) podGroup(ctx context.Context, ns, name string) (*lockv1.PodGroup, error) {
	pg := &lockv1.PodGroup{}
	if err := r.Cached.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, pg); err != nil {
		return nil, err
	}
	return pg, nil
}

// members are the group's pods, the cache's own objects: callers only read
// them. A gang is asked about at each of its members' admissions, so this
// must not copy the members: a List from the cache copies each into a new
// list even without deep copies, which cost a 3,000-pod gang created pod by
// pod O(n²) — most of the webhook's CPU and a third of the pods' creation
// rate (test/bench: TestWebhookPodCreationRate).
func (r reads) members(_ context.Context, ns, group string) ([]*corev1.Pod, error) {
	objs, err := r.Members.ByIndex(indexGroupMembers, ns+"/"+group)
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// membership checks that a new pod may join the group its label names:
// a pod of a job (a Job, a JobSet, …) joins only its job's group (the one
// Lockstep made for its role — which the job controls —, or the one its
// template names), and a group a job owns takes only that job's pods.
// Membership is a label resolved in the pod's own namespace, so no pod can
// name a group of another namespace. podgroup.Admits answers the same for
// the pods this webhook does not see.
func (r reads) membership(ctx context.Context, ns string, pod *corev1.Pod, group string, pg *lockv1.PodGroup) (field.ErrorList, error) {
	owner, j, err := r.ownerJob(ctx, ns, pod)
	if err != nil {
		return nil, err
	}
	if j != nil {
		kind := j.GVK().Kind
		want, gang := groupOf(j, pod)
		if group != want {
			return field.ErrorList{field.Forbidden(labelPath, fmt.Sprintf(
				"a pod of %s %s joins only that %s's PodGroup (%s), not %q: remove the label or set it on the %s's pod template", kind, owner.Name, kind, orNone(want), group, kind))}, nil
		}
		if ref := controllerOf(pg); gang && pg != nil && (ref == nil || ref.UID != owner.UID) {
			return field.ErrorList{field.Forbidden(labelPath, notTheGang(group, kind, owner.Name, ref))}, nil
		}
	}
	if pg == nil {
		return nil, nil
	}
	if ref := metav1.GetControllerOf(pg); ref != nil && integrationSet.ForKind(ref.APIVersion, ref.Kind) != nil && (owner == nil || owner.UID != ref.UID) {
		return field.ErrorList{field.Forbidden(labelPath, fmt.Sprintf(
			"PodGroup %s is the gang of %s %s: only that %s's pods join it (create your own PodGroup for other pods)", group, ref.Kind, ref.Name, ref.Kind))}, nil
	}
	return nil, nil
}

// priority checks that a new member has its group's priority: a group's
// priority is its members' (which the API server's Priority admission and
// ResourceQuota govern), so a PodGroup cannot lend its pods a priority they
// were not admitted with. With a priorityClassName on the group, members
// must have that class's priority; without one, the members' priority must
// be the same.
func (r reads) priority(ctx context.Context, ns string, pod *corev1.Pod, group string, pg *lockv1.PodGroup) (field.ErrorList, error) {
	mine := corev1helpers.PodPriority(pod)
	path := field.NewPath("spec", "priorityClassName")
	if pg != nil && pg.Spec.PriorityClassName != "" {
		pc := &schedulingv1.PriorityClass{}
		err := r.Cached.Get(ctx, types.NamespacedName{Name: pg.Spec.PriorityClassName}, pc)
		if apierrors.IsNotFound(err) {
			return field.ErrorList{field.Invalid(path, pod.Spec.PriorityClassName, fmt.Sprintf(
				"PodGroup %s names PriorityClass %s, which does not exist: create it or recreate the PodGroup without a priorityClassName", group, pg.Spec.PriorityClassName))}, nil
		}
		if err != nil {
			return nil, err
		}
		if mine != pc.Value {
			return field.ErrorList{field.Invalid(path, pod.Spec.PriorityClassName, fmt.Sprintf(
				"the pod's priority %d differs from PodGroup %s's priorityClassName %s (%d); a group's priority is its members': set priorityClassName: %s on the pod (template), or recreate the PodGroup without a priorityClassName",
				mine, group, pc.Name, pc.Value, pc.Name))}, nil
		}
		return nil, nil
	}
	members, err := r.members(ctx, ns, group)
	if err != nil {
		return nil, err
	}
	// Members admitted before all share one priority, so the first live
	// one speaks for them all.
	for _, m := range members {
		if m.UID == pod.UID || !podgroup.Ours(m) || podgroup.Terminal(m) {
			continue
		}
		if p := corev1helpers.PodPriority(m); p != mine {
			return field.ErrorList{field.Invalid(path, pod.Spec.PriorityClassName, fmt.Sprintf(
				"the pod's priority %d differs from the priority %d of PodGroup %s's other members (pod %s, priorityClassName %q): all members of a group have one priority; give them the same priorityClassName",
				mine, p, group, m.Name, m.Spec.PriorityClassName))}, nil
		}
		break
	}
	return nil, nil
}

// groupPriorityAgrees checks, when a PodGroup is created, that its
// priorityClassName matches the priority of the members that already exist.
func (r reads) groupPriorityAgrees(ctx context.Context, ns string, pg *lockv1.PodGroup) (field.ErrorList, error) {
	if pg.Spec.PriorityClassName == "" {
		return nil, nil
	}
	pc := &schedulingv1.PriorityClass{}
	if err := r.Cached.Get(ctx, types.NamespacedName{Name: pg.Spec.PriorityClassName}, pc); err != nil {
		return nil, client.IgnoreNotFound(err) // validatePriority reports a missing class
	}
	members, err := r.members(ctx, ns, pg.Name)
	if err != nil {
		return nil, err
	}
	for _, m := range members {
		if !podgroup.Ours(m) || podgroup.Terminal(m) || corev1helpers.PodPriority(m) == pc.Value {
			continue
		}
		return field.ErrorList{field.Invalid(field.NewPath("spec", "priorityClassName"), pg.Spec.PriorityClassName, fmt.Sprintf(
			"its members have priority %d (pod %s, priorityClassName %q), not %s's %d; a group's priority is its members': remove spec.priorityClassName, or give the members priorityClassName %s",
			corev1helpers.PodPriority(m), m.Name, m.Spec.PriorityClassName, pc.Name, pc.Value, pc.Name))}, nil
	}
	return nil, nil
}

// controllerOf is pg's controller reference, nil for none or no pg.
func controllerOf(pg *lockv1.PodGroup) *metav1.OwnerReference {
	if pg == nil {
		return nil
	}
	return metav1.GetControllerOf(pg)
}

// notTheGang explains why PodGroup group, of the name of job kind/name's
// gang, is not that gang (ref is its controller reference).
func notTheGang(group, kind, name string, ref *metav1.OwnerReference) string {
	switch {
	case ref == nil:
		return fmt.Sprintf("PodGroup %s has no controller (it was created before %s %s), so it is not that %s's gang and Lockstep never adopts it: delete PodGroup %s and Lockstep creates the %s's own; to keep a group of your own, give it another name and set the label %s on the pod template",
			group, kind, name, kind, group, kind, lockv1.PodGroupLabel)
	case ref.Kind == kind && ref.Name == name:
		return fmt.Sprintf("PodGroup %s belongs to an earlier %s %s (uid %s) and is deleted with it; this %s's is created then: retry", group, kind, name, ref.UID, kind)
	}
	return fmt.Sprintf("PodGroup %s is the gang of %s %s, not of %s %s: give one of them another name", group, ref.Kind, ref.Name, kind, name)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
