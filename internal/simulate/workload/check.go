package workload

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// Built-in PriorityClasses the API server serves without a manifest.
var systemPriorities = map[string]int32{
	"system-cluster-critical": 2000000000,
	"system-node-critical":    2000001000,
}

// priority resolves a pod spec's priority as the API server's Priority
// admission does — its PriorityClass's value (the global default's when it
// names none, else 0) — and sets spec.priority and spec.preemptionPolicy.
func (b *builder) priority(spec *corev1.PodSpec, path *field.Path) (int32, field.ErrorList) {
	if spec.Priority != nil {
		return 0, field.ErrorList{field.Forbidden(path.Child("priority"), "set by the API server from priorityClassName: remove it")}
	}
	name := spec.PriorityClassName
	if name == "" {
		for _, pc := range b.w.PriorityClasses {
			if pc.GlobalDefault {
				name = pc.Name
			}
		}
	}
	if name == "" {
		spec.Priority = ptr.To(int32(0))
		return 0, nil
	}
	if v, ok := systemPriorities[name]; ok {
		spec.Priority = ptr.To(v)
		return v, nil
	}
	pc := b.w.PriorityClasses[name]
	if pc == nil {
		return 0, field.ErrorList{field.Invalid(path.Child("priorityClassName"), name, "no PriorityClass of this name in the "+b.where()+": add it (the API server refuses a pod naming a missing class)")}
	}
	spec.Priority = ptr.To(pc.Value)
	if pc.PreemptionPolicy != nil {
		spec.PreemptionPolicy = ptr.To(*pc.PreemptionPolicy)
	}
	return pc.Value, nil
}

func (b *builder) checkTemplate(t *corev1.PodTemplateSpec, path *field.Path) field.ErrorList {
	return b.checkSpec(&t.Spec, path.Child("spec"))
}

// checkSpec refuses what the simulator does not model in a pod spec
// (rather than ignoring it); a Live workload keeps it.
func (b *builder) checkSpec(spec *corev1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, rc := range spec.ResourceClaims {
		if (rc.ResourceClaimName == nil) == (rc.ResourceClaimTemplateName == nil) {
			errs = append(errs, field.Required(path.Child("resourceClaims").Index(i), "exactly one of resourceClaimName and resourceClaimTemplateName"))
		}
	}
	if b.opts.Live {
		return errs
	}
	if len(spec.SchedulingGates) > 0 {
		errs = append(errs, field.Forbidden(path.Child("schedulingGates"), "nothing removes a scheduling gate in a simulation: remove them"))
	}
	if a := spec.Affinity; a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil) {
		errs = append(errs, field.Forbidden(path.Child("affinity"), "inter-pod affinity is not simulated: remove podAffinity and podAntiAffinity (node affinity is simulated)"))
	}
	if len(spec.TopologySpreadConstraints) > 0 {
		errs = append(errs, field.Forbidden(path.Child("topologySpreadConstraints"), "pod topology spread is not simulated: remove it (a PodGroup's topology constraint is simulated)"))
	}
	for i, v := range spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			errs = append(errs, field.Forbidden(path.Child("volumes").Index(i), "persistent volumes are not simulated: remove the volume"))
		}
	}
	return errs
}

// specPath is the field path of a job pod's spec in the job's object.
func specPath(j *Job, p *corev1.Pod) *field.Path {
	if path := j.podSpec[p.Name]; path != nil {
		return path
	}
	switch j.Kind {
	case KindPodGroup:
		return field.NewPath("pods").Key(p.Name).Child("spec")
	case KindJobSet:
		return field.NewPath("spec", "replicatedJobs").Key(p.Labels[jobsetv1.ReplicatedJobNameKey]).Child("template", "spec", "template", "spec")
	case KindPod:
		return field.NewPath("spec")
	}
	return field.NewPath("spec", "template", "spec")
}

// checkRefs refuses a job whose pods name a claim template or claim the
// workload does not have.
func (b *builder) checkRefs(j *Job) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for _, p := range j.Pods {
		path := specPath(j, p).Child("resourceClaims")
		for i, rc := range p.Spec.ResourceClaims {
			var what string
			var key types.NamespacedName
			var ok bool
			switch {
			case rc.ResourceClaimTemplateName != nil:
				key = types.NamespacedName{Namespace: p.Namespace, Name: *rc.ResourceClaimTemplateName}
				_, ok = b.w.ClaimTemplates[key]
				what = "resourceClaimTemplateName"
			case rc.ResourceClaimName != nil:
				key = types.NamespacedName{Namespace: p.Namespace, Name: *rc.ResourceClaimName}
				ok = b.claims[key]
				what = "resourceClaimName"
			default:
				continue
			}
			msg := fmt.Sprintf("%s %s", path.Index(i).Child(what), key)
			if ok || seen[msg] {
				continue
			}
			seen[msg] = true
			kind := "ResourceClaimTemplate"
			if what == "resourceClaimName" {
				kind = "ResourceClaim"
			}
			errs = append(errs, field.Invalid(path.Index(i).Child(what), key.Name, "no "+kind+" "+key.String()+" in the "+b.where()+": add it"))
		}
	}
	return errs
}

// where names what a workload's references are looked up in, for errors.
func (b *builder) where() string {
	if b.opts.Live {
		return "manifest or the cluster"
	}
	return "workload"
}

// suspended refuses a suspended job in a simulation (it never runs); a
// Live workload reads it as it runs once started, and says so in Notes.
func (b *builder) suspended(path *field.Path, ref string) field.ErrorList {
	if b.opts.Live {
		b.w.Notes = append(b.w.Notes, ref+" is suspended (as Kueue creates what it queues): answered as if it started now")
		return nil
	}
	kind, _, _ := strings.Cut(ref, " ")
	return field.ErrorList{field.Forbidden(path, "a suspended "+kind+" never runs: remove it from the workload or unsuspend it")}
}
