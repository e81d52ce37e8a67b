package workload

import (
	"errors"
	"fmt"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	coredefaults "k8s.io/kubernetes/pkg/apis/core/v1"
	"k8s.io/utils/ptr"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/job"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/jobset"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// upstreamAPIVersion is the in-tree PodGroup's.
var upstreamAPIVersion = podgroup.UpstreamResource.GroupVersion().String()

// batchJob builds a batch/v1 Job: its first pods as the Job controller
// creates them, and its gang as Lockstep's Job integration makes it (the
// Job's own spec.scheduling gang, if it has one, for both gang models).
func (b *builder) batchJob(j *batchv1.Job) (*Job, field.ErrorList) {
	spec := field.NewPath("spec")
	tpath := spec.Child("template")
	var errs field.ErrorList
	if ptr.Deref(j.Spec.Suspend, false) {
		errs = append(errs, b.suspended(spec.Child("suspend"), "Job "+j.Namespace+"/"+j.Name)...)
	}
	parallelism := ptr.Deref(j.Spec.Parallelism, 1)
	if parallelism < 1 {
		errs = append(errs, field.Invalid(spec.Child("parallelism"), parallelism, "must be at least 1"))
	}
	completions := ptr.Deref(j.Spec.Completions, parallelism)
	if completions < 1 {
		errs = append(errs, field.Invalid(spec.Child("completions"), completions, "must be at least 1"))
	}
	if s := j.Spec.Scheduling; s != nil && s.SchedulingPolicy != nil && s.SchedulingPolicy.Basic != nil {
		errs = append(errs, field.Forbidden(spec.Child("scheduling", "schedulingPolicy", "basic"), "a basic in-tree group is not simulated: remove spec.scheduling, or use gang"))
	}
	errs = append(errs, b.checkTemplate(&j.Spec.Template, tpath)...)
	arrival, runtime, terrs := b.timing(j.Annotations, j.Spec.Template.Annotations, tpath)
	errs = append(errs, terrs...)
	interval, ierrs := podInterval(j.Annotations)
	errs = append(errs, ierrs...)
	every, save, cerrs := checkpointing(j.Annotations)
	errs = append(errs, cerrs...)
	prio, perrs := b.priority(&j.Spec.Template.Spec, tpath.Child("spec"))
	errs = append(errs, perrs...)
	if len(errs) > 0 {
		return nil, errs
	}
	uid := types.UID("job-" + j.Namespace + "-" + j.Name)
	j = j.DeepCopy()
	j.UID = uid
	b.ours(&j.Spec.Template.Spec)
	out := &Job{Kind: KindJob, Namespace: j.Namespace, Name: j.Name, UID: uid, Arrival: arrival, Runtime: runtime, PodInterval: interval, Priority: prio, Template: tpath.String(),
		CheckpointInterval: every, CheckpointDuration: save}
	owner := ControllerRef(batchv1.SchemeGroupVersion.WithKind("Job").GroupVersion().String(), "Job", j.Name, uid)
	indexed := j.Spec.CompletionMode != nil && *j.Spec.CompletionMode == batchv1.IndexedCompletion
	n := min(parallelism, completions)
	for i := int32(0); i < n; i++ {
		labels := map[string]string{batchv1.JobNameLabel: j.Name, batchv1.ControllerUidLabel: string(uid)}
		var idx *int32
		if indexed {
			idx = ptr.To(i)
		}
		out.Pods = append(out.Pods, podFrom(&j.Spec.Template, j.Namespace, j.Name+"-"+strconv.Itoa(int(i)), idx, owner, labels, prio))
	}
	gj := job.Integration{}.Wrap(j)
	if jobintegration.InTreeGang(gj) {
		pg := inTreeGroup(j, parallelism)
		out.Gangs, out.InTree = []*lockv1.PodGroup{pg}, []*lockv1.PodGroup{pg}
		out.Need = int(pg.Spec.SchedulingPolicy.Gang.MinCount)
		out.GroupOf = repeat(pg.Name, len(out.Pods))
		return out, nil
	}
	return out, b.gangs(out, gj, completions, nil)
}

// gangs sets a job's gangs from its integration; a job that is not a
// gang runs as independent pods (as Lockstep runs it: one by one). role,
// when set, names the role of each of the job's pods (their group is the
// role's); else the integration reads it from the pod.
func (b *builder) gangs(out *Job, gj jobintegration.GenericJob, completions int32, role []string) field.ErrorList {
	groups, err := jobintegration.Groups(gj)
	var nq *jobintegration.NotQualified
	switch {
	case errors.As(err, &nq) && nq.Named != "":
		return field.ErrorList{field.Forbidden(field.NewPath(out.Template), "a job whose pod template names its own PodGroup is not simulated: remove the label (Lockstep makes the gang) or submit the PodGroup with bare pods")}
	case err != nil:
		out.Completions = int(completions)
		return nil
	}
	pgs, root, err := jobintegration.PodGroups(gj, groups)
	if err != nil {
		out.Completions = int(completions)
		return nil
	}
	out.Gangs, out.Tree = pgs, root
	for _, pg := range pgs {
		if g := pg.Spec.SchedulingPolicy.Gang; g != nil {
			out.Need += int(g.MinCount)
		}
		in := pg.DeepCopy()
		in.APIVersion = upstreamAPIVersion
		in.Spec.DisruptionMode = &lockv1.DisruptionMode{Single: &lockv1.SingleDisruptionMode{}}
		in.Spec.ParentCompositePodGroupName = nil
		out.InTree = append(out.InTree, in)
	}
	out.GroupOf = make([]string, len(out.Pods))
	for i, p := range out.Pods {
		if role != nil {
			out.GroupOf[i] = jobintegration.GroupFor(groups, role[i])
			continue
		}
		out.GroupOf[i] = jobintegration.GroupOf(gj, groups, p)
	}
	return nil
}

// inTreeGroup is the PodGroup the in-tree Job controller makes of a Job's
// spec.scheduling (WorkloadWithJob): minCount defaulting to parallelism,
// disruptionMode defaulting to single.
func inTreeGroup(j *batchv1.Job, parallelism int32) *lockv1.PodGroup {
	s := j.Spec.Scheduling
	minCount := parallelism
	if g := s.SchedulingPolicy.Gang; g != nil && g.MinCount != nil {
		minCount = *g.MinCount
	}
	pg := &lockv1.PodGroup{
		TypeMeta:   metav1.TypeMeta{APIVersion: upstreamAPIVersion, Kind: "PodGroup"},
		ObjectMeta: metav1.ObjectMeta{Namespace: j.Namespace, Name: j.Name, OwnerReferences: []metav1.OwnerReference{ControllerRef("batch/v1", "Job", j.Name, j.UID)}},
		Spec: lockv1.PodGroupSpec{
			SchedulingPolicy: lockv1.PodGroupSchedulingPolicy{Gang: &lockv1.GangSchedulingPolicy{MinCount: minCount}},
			DisruptionMode:   &lockv1.DisruptionMode{Single: &lockv1.SingleDisruptionMode{}},
		},
	}
	if dm := s.DisruptionMode; dm != nil && dm.All != nil {
		pg.Spec.DisruptionMode = &lockv1.DisruptionMode{All: &lockv1.AllDisruptionMode{}}
	}
	if c := s.SchedulingConstraints; c != nil && len(c.Topology) > 0 {
		pg.Spec.SchedulingConstraints = &lockv1.PodGroupSchedulingConstraints{}
		for _, t := range c.Topology {
			pg.Spec.SchedulingConstraints.Topology = append(pg.Spec.SchedulingConstraints.Topology, lockv1.TopologyConstraint{Key: t.Key})
		}
	}
	return pg
}

// jobSet builds a JobSet: every replicated job's child Jobs' pods, and its
// gangs as Lockstep's JobSet integration makes them.
func (b *builder) jobSet(js *jobsetv1.JobSet) (*Job, field.ErrorList) {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if sp := js.Spec.StartupPolicy; sp != nil && sp.StartupPolicyOrder == jobsetv1.InOrder {
		errs = append(errs, field.Forbidden(spec.Child("startupPolicy"), "replicated jobs started in order are not simulated: remove startupPolicy"))
	}
	if sp := js.Spec.SuccessPolicy; sp != nil && (sp.Operator == jobsetv1.OperatorAny || len(sp.TargetReplicatedJobs) > 0) {
		errs = append(errs, field.Forbidden(spec.Child("successPolicy"), "only the default success policy (every child Job completes) is simulated: remove successPolicy"))
	}
	if ptr.Deref(js.Spec.Suspend, false) {
		errs = append(errs, b.suspended(spec.Child("suspend"), "JobSet "+js.Namespace+"/"+js.Name)...)
	}
	if len(js.Spec.ReplicatedJobs) == 0 {
		errs = append(errs, field.Required(spec.Child("replicatedJobs"), "a JobSet runs its replicated jobs"))
	}
	var prio int32
	var runtimeTemplate map[string]string
	var runtimePath *field.Path
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		p := spec.Child("replicatedJobs").Key(rj.Name).Child("template", "spec", "template")
		if len(rj.DependsOn) > 0 {
			errs = append(errs, field.Forbidden(spec.Child("replicatedJobs").Key(rj.Name).Child("dependsOn"), "replicated jobs that wait for each other are not simulated: remove dependsOn"))
		}
		errs = append(errs, b.checkTemplate(&rj.Template.Spec.Template, p)...)
		pr, perrs := b.priority(&rj.Template.Spec.Template.Spec, p.Child("spec"))
		errs = append(errs, perrs...)
		if i == 0 || pr < prio {
			prio = pr
		}
		if runtimeTemplate == nil {
			runtimeTemplate, runtimePath = rj.Template.Spec.Template.Annotations, p
		}
	}
	arrival, runtime, terrs := b.timing(js.Annotations, runtimeTemplate, runtimePath)
	errs = append(errs, terrs...)
	interval, ierrs := podInterval(js.Annotations)
	errs = append(errs, ierrs...)
	if len(errs) > 0 {
		return nil, errs
	}
	uid := types.UID("jobset-" + js.Namespace + "-" + js.Name)
	js = js.DeepCopy()
	js.UID = uid
	out := &Job{Kind: KindJobSet, Namespace: js.Namespace, Name: js.Name, UID: uid, Arrival: arrival, Runtime: runtime, PodInterval: interval, Priority: prio, Template: "spec.replicatedJobs"}
	var completions int32
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		b.ours(&rj.Template.Spec.Template.Spec)
		completions += jobSetChildren(out, js, rj)
	}
	return out, b.gangs(out, jobset.Integration{}.Wrap(js), completions, nil)
}

// jobSetChildren adds the pods of one replicated job's child Jobs (named
// <jobset>-<replicated job>-<replica>, as the JobSet controller names
// them) and returns how many pods they complete.
func jobSetChildren(out *Job, js *jobsetv1.JobSet, rj *jobsetv1.ReplicatedJob) int32 {
	replicas := rj.Replicas
	if replicas == 0 {
		replicas = 1
	}
	parallelism := ptr.Deref(rj.Template.Spec.Parallelism, 1)
	completions := ptr.Deref(rj.Template.Spec.Completions, parallelism)
	indexed := rj.Template.Spec.CompletionMode != nil && *rj.Template.Spec.CompletionMode == batchv1.IndexedCompletion
	prio := ptr.Deref(rj.Template.Spec.Template.Spec.Priority, 0)
	for r := int32(0); r < replicas; r++ {
		child := fmt.Sprintf("%s-%s-%d", js.Name, rj.Name, r)
		childUID := types.UID("job-" + js.Namespace + "-" + child)
		owner := ControllerRef("batch/v1", "Job", child, childUID)
		for i := int32(0); i < min(parallelism, completions); i++ {
			labels := map[string]string{
				jobsetv1.JobSetNameKey: js.Name, jobsetv1.ReplicatedJobNameKey: rj.Name, jobsetv1.JobIndexKey: strconv.Itoa(int(r)),
				batchv1.JobNameLabel: child, batchv1.ControllerUidLabel: string(childUID),
			}
			var idx *int32
			if indexed {
				idx = ptr.To(i)
			}
			out.Pods = append(out.Pods, podFrom(&rj.Template.Spec.Template, js.Namespace, fmt.Sprintf("%s-%d", child, i), idx, owner, labels, prio))
		}
	}
	return replicas * completions
}

// podGroupJob builds a PodGroup with the pods that name it.
func (b *builder) podGroupJob(gd *groupDoc) (*Job, field.ErrorList) {
	pg := gd.pg
	var errs field.ErrorList
	if len(gd.pods) == 0 {
		return nil, field.ErrorList{field.Required(field.NewPath("metadata", "name"), fmt.Sprintf("no pod names the group (label %s=%s): add its pods to the workload", lockv1.PodGroupLabel, pg.Name))}
	}
	if len(pg.Spec.ResourceClaims) > 0 {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "resourceClaims"), "claims reserved for the whole PodGroup are not supported by Lockstep: give each pod its own claim"))
	}
	if podgroup.IsGang(pg) && int(pg.Spec.SchedulingPolicy.Gang.MinCount) > len(gd.pods) {
		errs = append(errs, field.Invalid(field.NewPath("spec", "schedulingPolicy", "gang", "minCount"), pg.Spec.SchedulingPolicy.Gang.MinCount,
			fmt.Sprintf("only %d pods name the group: it could never start; lower minCount or add pods", len(gd.pods))))
	}
	arrival, runtime, terrs := b.timing(pg.Annotations, nil, nil)
	errs = append(errs, terrs...)
	interval, ierrs := podInterval(pg.Annotations)
	errs = append(errs, ierrs...)
	out := &Job{Kind: KindPodGroup, Namespace: pg.Namespace, Name: pg.Name, UID: types.UID("podgroup-" + pg.Namespace + "-" + pg.Name), Arrival: arrival, Runtime: runtime, PodInterval: interval, Template: "pods"}
	for i, p := range gd.pods {
		pp := field.NewPath("pods").Key(p.Name)
		for _, k := range []string{ArrivalAnnotation, RuntimeAnnotation} {
			if _, ok := p.Annotations[k]; ok {
				errs = append(errs, field.Forbidden(pp.Child("metadata", "annotations").Key(k), "a member arrives and runs with its PodGroup: set it on the PodGroup"))
			}
		}
		if p.Spec.NodeName != "" {
			errs = append(errs, field.Forbidden(pp.Child("spec", "nodeName"), "a pod bound in advance is not simulated: remove nodeName"))
		}
		errs = append(errs, b.checkSpec(&p.Spec, pp.Child("spec"))...)
		prio, perrs := b.priority(&p.Spec, pp.Child("spec"))
		errs = append(errs, perrs...)
		if i == 0 || prio < out.Priority {
			out.Priority = prio
		}
		cp := p.DeepCopy()
		b.ours(&cp.Spec)
		cp.Spec.Priority = ptr.To(prio)
		cp.UID = ""
		out.Pods = append(out.Pods, cp)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if podgroup.IsGang(pg) {
		out.Need = int(pg.Spec.SchedulingPolicy.Gang.MinCount)
	} else {
		out.Completions = len(out.Pods)
	}
	in := pg.DeepCopy()
	in.APIVersion = upstreamAPIVersion
	if in.Spec.DisruptionMode == nil {
		in.Spec.DisruptionMode = &lockv1.DisruptionMode{Single: &lockv1.SingleDisruptionMode{}}
	}
	out.Gangs, out.InTree = []*lockv1.PodGroup{pg}, []*lockv1.PodGroup{in}
	out.GroupOf = repeat(pg.Name, len(out.Pods))
	return out, nil
}

// barePod builds a pod that names no group: a job of one pod.
func (b *builder) barePod(p *corev1.Pod) (*Job, field.ErrorList) {
	var errs field.ErrorList
	if p.Spec.NodeName != "" {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "nodeName"), "a pod bound in advance is not simulated: remove nodeName"))
	}
	errs = append(errs, b.checkSpec(&p.Spec, field.NewPath("spec"))...)
	arrival, runtime, terrs := b.timing(p.Annotations, nil, nil)
	errs = append(errs, terrs...)
	if _, ok := p.Annotations[PodIntervalAnnotation]; ok {
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "annotations").Key(PodIntervalAnnotation), "a bare pod is one pod: remove it"))
	}
	prio, perrs := b.priority(&p.Spec, field.NewPath("spec"))
	errs = append(errs, perrs...)
	if len(errs) > 0 {
		return nil, errs
	}
	cp := p.DeepCopy()
	b.ours(&cp.Spec)
	cp.Spec.Priority = ptr.To(prio)
	cp.UID = ""
	return &Job{Kind: KindPod, Namespace: p.Namespace, Name: p.Name, UID: types.UID("pod-" + p.Namespace + "-" + p.Name),
		Arrival: arrival, Runtime: runtime, Priority: prio, Pods: []*corev1.Pod{cp}, Completions: 1, Template: "spec"}, nil
}

// ours makes a pod spec Lockstep's, as a simulation of Lockstep assumes
// whatever scheduler the workload names; a Live read keeps the name the
// user wrote (defaulted as the API server defaults it), for the caller to
// judge (the pods of another scheduler are not Lockstep's to place).
func (b *builder) ours(spec *corev1.PodSpec) {
	switch {
	case !b.opts.Live:
		spec.SchedulerName = lockv1.SchedulerName
	case spec.SchedulerName == "":
		spec.SchedulerName = corev1.DefaultSchedulerName
	}
}

// podFrom is a pod of a template as a Job controller creates it (the
// template's schedulerName set by ours).
func podFrom(t *corev1.PodTemplateSpec, ns, name string, index *int32, owner metav1.OwnerReference, labels map[string]string, prio int32) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: *t.ObjectMeta.DeepCopy(), Spec: *t.Spec.DeepCopy()}
	p.Namespace, p.Name = ns, name
	p.OwnerReferences = []metav1.OwnerReference{owner}
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	for k, v := range labels {
		p.Labels[k] = v
	}
	if index != nil {
		i := strconv.Itoa(int(*index))
		p.Labels[lockv1.JobCompletionIndexLabel] = i
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[lockv1.JobCompletionIndexLabel] = i
	}
	// The API server defaults the pod the controller creates (requests
	// from limits, …).
	coredefaults.SetObjectDefaults_Pod(p)
	p.Spec.SchedulerName = t.Spec.SchedulerName
	p.Spec.Priority = ptr.To(prio)
	return p
}

// ControllerRef is the controller reference a job's controller sets on
// what it creates.
func ControllerRef(apiVersion, kind, name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}
