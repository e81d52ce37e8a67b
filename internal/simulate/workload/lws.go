package workload

import (
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/lockstep-dev/lockstep/internal/jobintegration/lws"
)

// KindLeaderWorkerSet is a LeaderWorkerSet's job.
const KindLeaderWorkerSet = "LeaderWorkerSet"

// lwsJob builds a LeaderWorkerSet as its controllers create it: replicas
// groups, each a leader (<lws>-<i>) and size-1 workers (<lws>-<i>-<k>)
// labelled with their group and worker index, each group a gang of its own
// as Lockstep's integration makes them.
func (b *builder) lwsJob(obj *lwsv1.LeaderWorkerSet) (*Job, field.ErrorList) {
	obj = obj.DeepCopy()
	obj.Namespace = b.nsOr(obj.Namespace)
	obj.UID = types.UID("leaderworkerset-" + obj.Namespace + "-" + obj.Name)
	j := lws.Integration{}.Wrap(obj)
	roles := j.Roles() // leader, worker
	var errs field.ErrorList
	prios := make([]int32, len(roles))
	for i, r := range roles {
		if i > 0 && r.Template == roles[0].Template { // no leaderTemplate: the leader is a worker
			prios[i] = prios[0]
			continue
		}
		errs = append(errs, b.checkTemplate(r.Template, r.Path)...)
		b.ours(&r.Template.Spec)
		p, perrs := b.priority(&r.Template.Spec, r.Path.Child("spec"))
		errs = append(errs, perrs...)
		prios[i] = p
	}
	arrival, runtime, terrs := b.timing(obj.Annotations, roles[0].Template.Annotations, roles[0].Path)
	errs = append(errs, terrs...)
	interval, ierrs := podInterval(obj.Annotations)
	errs = append(errs, ierrs...)
	if len(errs) > 0 {
		return nil, errs
	}
	out := &Job{Kind: KindLeaderWorkerSet, Namespace: obj.Namespace, Name: obj.Name, UID: obj.UID, Arrival: arrival, Runtime: runtime, PodInterval: interval,
		Priority: min(prios[0], prios[1]), Template: roles[0].Path.String(), podSpec: map[string]*field.Path{}}
	owner := ControllerRef(lwsv1.GroupVersion.String(), KindLeaderWorkerSet, obj.Name, obj.UID)
	size := ptr.Deref(obj.Spec.LeaderWorkerTemplate.Size, 1)
	for g := range ptr.Deref(obj.Spec.Replicas, 1) {
		for w := range size {
			r, prio, name := roles[1], prios[1], fmt.Sprintf("%s-%d-%d", obj.Name, g, w)
			if w == 0 {
				r, prio, name = roles[0], prios[0], fmt.Sprintf("%s-%d", obj.Name, g)
			}
			labels := map[string]string{lwsv1.SetNameLabelKey: obj.Name, lwsv1.GroupIndexLabelKey: strconv.Itoa(int(g)), lwsv1.WorkerIndexLabelKey: strconv.Itoa(int(w))}
			out.Pods = append(out.Pods, podFrom(r.Template, obj.Namespace, name, nil, owner, labels, prio))
			out.podSpec[name] = r.Path.Child("spec")
		}
	}
	return out, b.gangs(out, j, int32(len(out.Pods)), nil)
}
