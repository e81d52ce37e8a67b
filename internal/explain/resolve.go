package explain

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/integrations"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/internal/queue"
)

// resolve turns a target into the unit the scheduler would schedule.
func resolve(ctx context.Context, dyn dynamic.Interface, st *state, t Target) (*unit, error) {
	switch t.Kind {
	case "podgroup", "podgroups", "pg":
		pg := st.groups[t.Namespace+"/"+t.Name]
		if pg == nil {
			return nil, fmt.Errorf("PodGroup %s/%s not found", t.Namespace, t.Name)
		}
		return groupUnit(st, pg, t.Namespace, t.Name), nil
	case "pod", "pods", "po":
		p := st.pod(t.Namespace, t.Name)
		if p == nil {
			return nil, fmt.Errorf("pod %s/%s not found", t.Namespace, t.Name)
		}
		if g := podgroup.GroupOf(p); g != "" {
			return groupUnit(st, st.groups[t.Namespace+"/"+g], t.Namespace, g), nil
		}
		return podUnit(st, p), nil
	}
	if integ := integrations.All().ForAlias(t.Kind); integ != nil {
		return resolveJob(ctx, dyn, st, integ, t)
	}
	if w, integ := integrations.All().WrapperForAlias(t.Kind); w != nil {
		return resolveWrapped(ctx, dyn, st, w, integ, t)
	}
	return nil, fmt.Errorf("cannot explain %q: want podgroup, pod, or a job kind (%s)", t.Kind, strings.Join(JobKinds(), ", "))
}

// JobKinds are the names `explain` takes for a job: the first alias of
// every integration and of every kind that runs as one (Wrapped).
func JobKinds() []string {
	var out []string
	for _, integ := range integrations.All() {
		out = append(out, integ.Aliases()[0])
		if wr, ok := integ.(jobintegration.Wrapped); ok {
			for _, w := range wr.WrappedBy() {
				out = append(out, w.Aliases[0])
			}
		}
	}
	return out
}

// resolveWrapped resolves an object of a kind that runs as a job of integ
// (a TrainJob, as a JobSet) into that job's unit: the job of its name that
// it controls.
func resolveWrapped(ctx context.Context, dyn dynamic.Interface, st *state, w *jobintegration.Wrapper, integ jobintegration.Integration, t Target) (*unit, error) {
	what := w.GVK.Kind + " " + t.Namespace + "/" + t.Name
	u, err := dyn.Resource(w.GVK.GroupVersion().WithResource(w.Resource)).Namespace(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	kind := integ.GVK()
	job, err := dyn.Resource(kind.GroupVersion().WithResource(integ.Resource())).Namespace(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%s runs as %s %s, which its controller has not created yet", what, kind.Kind, t.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("%s runs as %s %s: %w", what, kind.Kind, t.Name, err)
	}
	if ref := metav1.GetControllerOf(job); ref == nil || ref.UID != u.GetUID() {
		return nil, fmt.Errorf("%s %s/%s is not %s's: it is controlled by %v", kind.Kind, t.Namespace, t.Name, what, controllerName(ref))
	}
	return resolveJobObject(ctx, dyn, st, integ, t, job)
}

func controllerName(ref *metav1.OwnerReference) string {
	if ref == nil {
		return "nothing"
	}
	return ref.Kind + " " + ref.Name
}

// resolveJob resolves a job of an integration (a Job, a JobSet, …) into
// the unit of its first group that is not running whole, or its first
// group; a job that is not a gang into its first pending pod.
func resolveJob(ctx context.Context, dyn dynamic.Interface, st *state, integ jobintegration.Integration, t Target) (*unit, error) {
	gvk := integ.GVK()
	u, err := dyn.Resource(gvk.GroupVersion().WithResource(integ.Resource())).Namespace(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s %s/%s: %w", gvk.Kind, t.Namespace, t.Name, err)
	}
	return resolveJobObject(ctx, dyn, st, integ, t, u)
}

// resolveJobObject is resolveJob of the job u, read already.
func resolveJobObject(ctx context.Context, dyn dynamic.Interface, st *state, integ jobintegration.Integration, t Target, u *unstructured.Unstructured) (*unit, error) {
	gvk := integ.GVK()
	obj := integ.NewObject()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return nil, fmt.Errorf("%s %s/%s: %w", gvk.Kind, t.Namespace, t.Name, err)
	}
	j := integ.Wrap(obj)
	label := gvk.Kind + " " + t.Namespace + "/" + t.Name
	groups, gerr := jobintegration.Groups(j)
	var chosen *unit
	for _, g := range groups {
		gu := groupUnit(st, st.groups[t.Namespace+"/"+g.Name], t.Namespace, g.Name)
		if len(groups) > 1 {
			gu.label += " (" + label + ")"
		}
		if chosen == nil || (chosen.Bound >= chosen.MinCount() && gu.Bound < gu.MinCount()) {
			chosen = gu
		}
	}
	if chosen != nil && chosen.Group != nil {
		chosen.owner = j
		return chosen, nil
	}
	// Not a gang (or its group is not there yet): its first pending pod.
	for _, p := range st.pods {
		if p.Namespace != t.Namespace || !podgroup.Pending(p) {
			continue
		}
		if name, uid, err := integ.OwnerOf(ctx, dynGetter{dyn}, p); err == nil && name == t.Name && uid == obj.GetUID() {
			pu := podUnit(st, p)
			pu.owner = j
			return pu, nil
		}
	}
	if chosen == nil {
		chosen = &unit{Unit: &podgroup.Unit{}, size: int(jobintegration.Size(j))}
		if gerr != nil {
			chosen.notGang = gerr.Error()
		}
	}
	chosen.label, chosen.owner = label, j
	return chosen, nil
}

// groupUnit resolves a group as the scheduler does (podgroup.Resolve; pg
// may be nil: the pods name a group that does not exist).
func groupUnit(st *state, pg *lockv1.PodGroup, ns, name string) *unit {
	u := &unit{Unit: podgroup.Resolve(pg, ns, name, st.pods, nil, podgroup.WithClusterQueues(st.clusterQueueOf)), label: "PodGroup " + ns + "/" + name, key: queue.GroupKey(ns, name).String()}
	if pg != nil {
		u.priority = st.groupPriority(pg)
	}
	return u
}

func podUnit(st *state, p *corev1.Pod) *unit {
	return &unit{Unit: podgroup.ResolvePod(p, nil, podgroup.WithClusterQueues(st.clusterQueueOf)), label: "pod " + p.Namespace + "/" + p.Name, key: queue.PodKey(p.Namespace, p.Name).String(), priority: corev1helpers.PodPriority(p)}
}

// dynGetter reads the objects of the integrations' kinds (a JobSet's Jobs,
// …) live through the dynamic client, for Integration.OwnerOf.
type dynGetter struct{ dyn dynamic.Interface }

var scheme = integrations.Scheme()

func (g dynGetter) Get(ctx context.Context, key types.NamespacedName, obj client.Object) error {
	gvks, _, err := scheme.ObjectKinds(obj)
	if err != nil {
		return err
	}
	gvk := gvks[0]
	integ := integrations.All().ForKind(gvk.GroupVersion().String(), gvk.Kind)
	if integ == nil {
		return fmt.Errorf("explain reads no %s", gvk)
	}
	u, err := g.dyn.Resource(gvk.GroupVersion().WithResource(integ.Resource())).Namespace(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj)
}
