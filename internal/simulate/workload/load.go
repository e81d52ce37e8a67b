package workload

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	batchdefaults "k8s.io/kubernetes/pkg/apis/batch/v1"
	coredefaults "k8s.io/kubernetes/pkg/apis/core/v1"
	resourcedefaults "k8s.io/kubernetes/pkg/apis/resource/v1"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kjson "sigs.k8s.io/json"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"
	"sigs.k8s.io/yaml"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// Source is one workload file (or standard input) as read.
type Source struct {
	Name string
	Data []byte
}

// LoadOptions are what Load assumes where the workload says nothing.
type LoadOptions struct {
	// DefaultRuntime is the runtime of a job without RuntimeAnnotation;
	// 0 makes the annotation required.
	DefaultRuntime time.Duration
	// Namespace is the namespace of objects that name none ("default"
	// when empty).
	Namespace string
	// Live reads the workload for a decision on a live cluster (`explain
	// -f`) rather than a simulation: what only the simulator does not
	// model (scheduling gates, inter-pod affinity, topology spread,
	// volumes) is kept, for the scheduler's decision core models it, and a
	// suspended job is read as it runs once started (Workload.Notes says
	// so).
	Live bool
	// Existing are objects the workload may refer to without carrying
	// them: a live cluster's.
	Existing Existing
}

// Existing are a cluster's objects a workload's pods may name.
type Existing struct {
	PriorityClasses []*schedulingv1.PriorityClass
	ClaimTemplates  []*resourcev1.ResourceClaimTemplate
	// Claims are the ResourceClaims by namespace/name.
	Claims []types.NamespacedName
}

// ObjectError is a problem with one object of a workload: where it was
// read, which object, and the field errors (each with its path).
type ObjectError struct {
	Where  string // "jobs.yaml, document 3"
	Object string // "Job ml/train-a"
	Errs   field.ErrorList
}

func (e *ObjectError) Error() string {
	msgs := make([]string, 0, len(e.Errs))
	for _, fe := range e.Errs {
		msgs = append(msgs, fe.Error())
	}
	prefix := e.Object
	if e.Where != "" {
		prefix += " (" + e.Where + ")"
	}
	return prefix + ": " + strings.Join(msgs, "; ")
}

// ErrInvalid marks a workload or cluster that cannot be simulated: nothing
// ran.
var ErrInvalid = errors.New("cannot be simulated")

// ErrInvalidManifest marks a Live workload that cannot be decided:
// nothing was.
var ErrInvalidManifest = errors.New("the manifest cannot be answered for")

// object is one decoded document.
type object struct {
	where string
	kind  string
	obj   any
}

type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

// kinds maps apiVersion/kind to a constructor of the typed object.
var kinds = map[string]func() any{
	"v1/Namespace":                    func() any { return &corev1.Namespace{} },
	"v1/Pod":                          func() any { return &corev1.Pod{} },
	"batch/v1/Job":                    func() any { return &batchv1.Job{} },
	"jobset.x-k8s.io/v1alpha2/JobSet": func() any { return &jobsetv1.JobSet{} },
	"leaderworkerset.x-k8s.io/v1/LeaderWorkerSet":       func() any { return &lwsv1.LeaderWorkerSet{} },
	"scheduling.lockstep.dev/v1beta1/PodGroup":          func() any { return &lockv1.PodGroup{} },
	"scheduling.k8s.io/v1beta1/PodGroup":                func() any { return &lockv1.PodGroup{} },
	"scheduling.lockstep.dev/v1beta1/CompositePodGroup": func() any { return &lockv1.CompositePodGroup{} },
	"scheduling.k8s.io/v1beta1/CompositePodGroup":       func() any { return &lockv1.CompositePodGroup{} },
	"scheduling.k8s.io/v1/PriorityClass":                func() any { return &schedulingv1.PriorityClass{} },
	"resource.k8s.io/v1/DeviceClass":                    func() any { return &resourcev1.DeviceClass{} },
	"resource.k8s.io/v1/ResourceClaimTemplate":          func() any { return &resourcev1.ResourceClaimTemplate{} },
	"resource.k8s.io/v1/ResourceClaim":                  func() any { return &resourcev1.ResourceClaim{} },
	APIVersion + "/Failure":                             func() any { return &failureDoc{} },
	APIVersion + "/Mix":                                 func() any { return &MixDoc{} },
}

// supportedKinds lists kinds for messages.
func supportedKinds() string {
	out := make([]string, 0, len(kinds))
	for k := range kinds {
		out = append(out, k)
	}
	for k := range roleKinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// decode splits the sources into documents and decodes each strictly
// (unknown fields are errors) into its typed object.
func decode(sources []Source) ([]object, []error) {
	var out []object
	var errs []error
	for _, src := range sources {
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(src.Data)))
		for n := 1; ; n++ {
			doc, err := r.Read()
			if err == io.EOF {
				break
			}
			where := fmt.Sprintf("%s, document %d", src.Name, n)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
				break
			}
			if len(bytes.TrimSpace(stripComments(doc))) == 0 {
				continue
			}
			o, err := decodeOne(doc, where)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out = append(out, o)
		}
	}
	return out, errs
}

func decodeOne(doc []byte, where string) (object, error) {
	var tm typeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return object{}, fmt.Errorf("%s: %w", where, err)
	}
	ref := tm.Kind + " " + tm.Metadata.Name
	if tm.Metadata.Namespace != "" {
		ref = tm.Kind + " " + tm.Metadata.Namespace + "/" + tm.Metadata.Name
	}
	mk := kinds[tm.APIVersion+"/"+tm.Kind]
	if integ := roleKinds[tm.APIVersion+"/"+tm.Kind]; mk == nil && integ != nil {
		mk = func() any { return integ.NewObject() }
	}
	if mk == nil {
		return object{}, &ObjectError{Where: where, Object: strings.TrimSpace(ref), Errs: field.ErrorList{
			field.NotSupported(field.NewPath("kind"), tm.APIVersion+"/"+tm.Kind, strings.Split(supportedKinds(), ", ")),
		}}
	}
	if tm.Metadata.Name == "" {
		return object{}, &ObjectError{Where: where, Object: tm.Kind, Errs: field.ErrorList{field.Required(field.NewPath("metadata", "name"), "every object needs a name")}}
	}
	obj := mk()
	if errs := unmarshalStrict(doc, obj); len(errs) > 0 {
		return object{}, &ObjectError{Where: where, Object: ref, Errs: errs}
	}
	setDefaults(obj)
	return object{where: where, kind: tm.Kind, obj: obj}, nil
}

// setDefaults fills in what the API server's defaulting would (a claim
// request's allocationMode and count, a Job's completionMode, a pod's
// restartPolicy, …), so the simulated objects are those the cluster would
// store.
func setDefaults(obj any) {
	switch v := obj.(type) {
	case *batchv1.Job:
		batchdefaults.SetObjectDefaults_Job(v)
	case *jobsetv1.JobSet:
		for i := range v.Spec.ReplicatedJobs {
			rj := &v.Spec.ReplicatedJobs[i]
			j := &batchv1.Job{Spec: rj.Template.Spec}
			batchdefaults.SetObjectDefaults_Job(j)
			rj.Template.Spec = j.Spec
		}
	case *corev1.Pod:
		coredefaults.SetObjectDefaults_Pod(v)
	case *resourcev1.ResourceClaimTemplate:
		resourcedefaults.SetObjectDefaults_ResourceClaimTemplate(v)
	case *resourcev1.ResourceClaim:
		resourcedefaults.SetObjectDefaults_ResourceClaim(v)
	}
}

// unmarshalStrict decodes a YAML document into obj, an unknown or
// repeated field being an error at its path.
func unmarshalStrict(doc []byte, obj any) field.ErrorList {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("<document>"), "", err.Error())}
	}
	strict, err := kjson.UnmarshalStrict(js, obj)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("<document>"), "", err.Error())}
	}
	var errs field.ErrorList
	for _, e := range strict {
		var fe kjson.FieldError
		if errors.As(e, &fe) {
			errs = append(errs, field.Forbidden(field.NewPath(fe.FieldPath()), e.Error()+": a typo, or a field of another version of the API"))
			continue
		}
		errs = append(errs, field.Invalid(field.NewPath("<document>"), "", e.Error()))
	}
	return errs
}

// stripComments drops YAML comment lines (a document of comments only is
// empty).
func stripComments(doc []byte) []byte {
	var b bytes.Buffer
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			b.Write(line)
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// Load reads a workload: every object decoded and checked, jobs built as
// their controllers build them. It refuses, before anything runs, an
// unknown kind, an unknown field, a malformed duration, a pod template
// naming a claim template or PriorityClass the workload lacks, and
// anything the simulator does not model; every error names the object and
// the field path. Whether each job fits the cluster is Check's.
func Load(sources []Source, opts LoadOptions) (*Workload, error) {
	objs, errs := decode(sources)
	w := &Workload{
		PriorityClasses: map[string]*schedulingv1.PriorityClass{},
		ClaimTemplates:  map[types.NamespacedName]*resourcev1.ResourceClaimTemplate{},
	}
	b := &builder{w: w, opts: opts, groups: map[types.NamespacedName]*groupDoc{}, claims: map[types.NamespacedName]bool{}}
	for _, pc := range opts.Existing.PriorityClasses {
		w.PriorityClasses[pc.Name] = pc
	}
	for _, t := range opts.Existing.ClaimTemplates {
		w.ClaimTemplates[types.NamespacedName{Namespace: t.Namespace, Name: t.Name}] = t
	}
	for _, c := range opts.Existing.Claims {
		b.claims[c] = true
	}
	// Objects jobs refer to first, then the jobs.
	for _, o := range objs {
		errs = append(errs, b.addSupporting(o)...)
	}
	for _, o := range objs {
		errs = append(errs, b.addJob(o)...)
	}
	errs = append(errs, b.finish()...)
	if len(errs) > 0 && opts.Live {
		return nil, fmt.Errorf("%w: %w", ErrInvalidManifest, errors.Join(errs...))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
	}
	sort.SliceStable(w.Jobs, func(i, j int) bool { return w.Jobs[i].Arrival < w.Jobs[j].Arrival })
	sort.SliceStable(w.Failures, func(i, j int) bool { return w.Failures[i].At < w.Failures[j].At })
	return w, nil
}

// builder accumulates a workload from decoded objects.
type builder struct {
	w    *Workload
	opts LoadOptions
	// groups are the PodGroups read, with the pods that name them.
	groups map[types.NamespacedName]*groupDoc
	// bare are pods that name no group.
	bare  []object
	names map[string]string // job "kind ns/name" → where, for duplicates
	// claims are the ResourceClaims pods may name (the workload's and
	// Existing's).
	claims map[types.NamespacedName]bool
	// composites are the CompositePodGroups read (a Live workload's).
	composites map[types.NamespacedName]*compositeDoc
}

type compositeDoc struct {
	where string
	c     *lockv1.CompositePodGroup
}

type groupDoc struct {
	where string
	pg    *lockv1.PodGroup
	pods  []*corev1.Pod
}

func (b *builder) nsOr(ns string) string {
	switch {
	case ns != "":
		return ns
	case b.opts.Namespace != "":
		return b.opts.Namespace
	}
	return "default"
}

// addSupporting records the objects jobs refer to.
func (b *builder) addSupporting(o object) []error {
	switch v := o.obj.(type) {
	case *schedulingv1.PriorityClass:
		b.w.PriorityClasses[v.Name] = v
	case *resourcev1.DeviceClass:
		b.w.DeviceClasses = append(b.w.DeviceClasses, v)
	case *resourcev1.ResourceClaimTemplate:
		v.Namespace = b.nsOr(v.Namespace)
		b.w.ClaimTemplates[types.NamespacedName{Namespace: v.Namespace, Name: v.Name}] = v
	case *resourcev1.ResourceClaim:
		v.Namespace = b.nsOr(v.Namespace)
		if v.Status.Allocation != nil || len(v.Status.ReservedFor) > 0 {
			return []error{&ObjectError{Where: o.where, Object: "ResourceClaim " + v.Namespace + "/" + v.Name,
				Errs: field.ErrorList{field.Forbidden(field.NewPath("status"), "a simulated claim starts unallocated; remove status")}}}
		}
		b.w.Claims = append(b.w.Claims, v)
		b.claims[types.NamespacedName{Namespace: v.Namespace, Name: v.Name}] = true
	case *lockv1.PodGroup:
		v.Namespace = b.nsOr(v.Namespace)
		key := types.NamespacedName{Namespace: v.Namespace, Name: v.Name}
		if podgroup.Upstream(v) && v.Spec.DisruptionMode == nil {
			// The API server defaults an in-tree group to single.
			v.Spec.DisruptionMode = &lockv1.DisruptionMode{Single: &lockv1.SingleDisruptionMode{}}
		}
		b.groups[key] = &groupDoc{where: o.where, pg: v}
	case *lockv1.CompositePodGroup:
		v.Namespace = b.nsOr(v.Namespace)
		if !b.opts.Live {
			return []error{&ObjectError{Where: o.where, Object: "CompositePodGroup " + v.Namespace + "/" + v.Name, Errs: field.ErrorList{field.Forbidden(field.NewPath("kind"),
				"a hand-written scheduling tree is not simulated: use a job whose roles make one (RayCluster, RayJob, an elastic PyTorchJob, an MPIJob with a launcher)")}}}
		}
		if b.composites == nil {
			b.composites = map[types.NamespacedName]*compositeDoc{}
		}
		b.composites[types.NamespacedName{Namespace: v.Namespace, Name: v.Name}] = &compositeDoc{where: o.where, c: v}
	case *failureDoc:
		f, errs := v.failure()
		if len(errs) > 0 {
			return []error{&ObjectError{Where: o.where, Object: "Failure " + v.Name, Errs: errs}}
		}
		b.w.Failures = append(b.w.Failures, f)
	}
	return nil
}

// addJob builds the jobs of one object (Pods are collected, then
// grouped by finish).
func (b *builder) addJob(o object) []error {
	var job *Job
	var errs field.ErrorList
	ref := ""
	switch v := o.obj.(type) {
	case *batchv1.Job:
		v.Namespace = b.nsOr(v.Namespace)
		ref = "Job " + v.Namespace + "/" + v.Name
		job, errs = b.batchJob(v)
	case *jobsetv1.JobSet:
		v.Namespace = b.nsOr(v.Namespace)
		ref = "JobSet " + v.Namespace + "/" + v.Name
		job, errs = b.jobSet(v)
	case *lwsv1.LeaderWorkerSet:
		ref = KindLeaderWorkerSet + " " + b.nsOr(v.Namespace) + "/" + v.Name
		job, errs = b.lwsJob(v)
	case *corev1.Pod:
		v.Namespace = b.nsOr(v.Namespace)
		if g := podgroup.GroupOf(v); g != "" {
			gd := b.groups[types.NamespacedName{Namespace: v.Namespace, Name: g}]
			if gd == nil {
				return []error{&ObjectError{Where: o.where, Object: "Pod " + v.Namespace + "/" + v.Name, Errs: field.ErrorList{
					field.NotFound(field.NewPath("metadata", "labels").Key(lockv1.PodGroupLabel), g)}}}
			}
			gd.pods = append(gd.pods, v)
			return nil
		}
		b.bare = append(b.bare, o)
		return nil
	case *MixDoc:
		jobs, templates, errs := v.generate(b.nsOr(v.Namespace))
		if len(errs) > 0 {
			return []error{&ObjectError{Where: o.where, Object: "Mix " + v.Name, Errs: errs}}
		}
		for _, t := range templates {
			b.w.ClaimTemplates[types.NamespacedName{Namespace: t.Namespace, Name: t.Name}] = t
		}
		for _, obj := range jobs {
			j, errs := b.batchJob(obj)
			if len(errs) > 0 {
				return []error{&ObjectError{Where: o.where, Object: "Mix " + v.Name + " (Job " + obj.Name + ")", Errs: errs}}
			}
			if err := b.add(j, o.where); err != nil {
				return []error{err}
			}
		}
		return nil
	default:
		integ, co := roleKindOf(o.obj)
		if integ == nil {
			return nil
		}
		ref = integ.GVK().Kind + " " + b.nsOr(co.GetNamespace()) + "/" + co.GetName()
		job, errs = b.rolesJob(integ, co)
	}
	if len(errs) > 0 {
		return []error{&ObjectError{Where: o.where, Object: ref, Errs: errs}}
	}
	if err := b.add(job, o.where); err != nil {
		return []error{err}
	}
	return nil
}

// add records a built job, refusing a second job of the same kind and name.
func (b *builder) add(j *Job, where string) error {
	if b.names == nil {
		b.names = map[string]string{}
	}
	if prev, ok := b.names[j.Ref()]; ok {
		return &ObjectError{Where: where, Object: j.Ref(), Errs: field.ErrorList{field.Duplicate(field.NewPath("metadata", "name"), j.Name+" (also in "+prev+")")}}
	}
	b.names[j.Ref()] = where
	b.w.Jobs = append(b.w.Jobs, j)
	return nil
}

// finish builds the jobs of PodGroups and bare pods, then checks what
// every job's pods refer to.
func (b *builder) finish() []error {
	var errs []error
	keys := make([]types.NamespacedName, 0, len(b.groups))
	for k := range b.groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	trees := map[types.NamespacedName]*Job{}
	for _, k := range keys {
		gd := b.groups[k]
		j, fe := b.podGroupJob(gd)
		if len(fe) > 0 {
			errs = append(errs, &ObjectError{Where: gd.where, Object: "PodGroup " + k.String(), Errs: fe})
			continue
		}
		if parent := podgroup.ParentOf(gd.pg); parent != "" {
			tree, err := b.intoTree(trees, j, gd, parent)
			if err != nil {
				errs = append(errs, err)
			} else if tree != nil {
				if err := b.add(tree, b.composites[types.NamespacedName{Namespace: tree.Namespace, Name: tree.Name}].where); err != nil {
					errs = append(errs, err)
				}
			}
			continue
		}
		if err := b.add(j, gd.where); err != nil {
			errs = append(errs, err)
		}
	}
	for _, o := range b.bare {
		p := o.obj.(*corev1.Pod)
		j, fe := b.barePod(p)
		if len(fe) > 0 {
			errs = append(errs, &ObjectError{Where: o.where, Object: "Pod " + p.Namespace + "/" + p.Name, Errs: fe})
			continue
		}
		if err := b.add(j, o.where); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errs
	}
	for _, j := range b.w.Jobs {
		if fe := b.checkRefs(j); len(fe) > 0 {
			errs = append(errs, &ObjectError{Where: b.names[j.Ref()], Object: j.Ref(), Errs: fe})
		}
	}
	return errs
}

// intoTree adds a PodGroup's job to the job of its tree (by its root
// CompositePodGroup, which the workload must hold with every composite
// between): one job the scheduler places as one unit. It returns the
// tree's job when it is new.
func (b *builder) intoTree(trees map[types.NamespacedName]*Job, j *Job, gd *groupDoc, parent string) (*Job, error) {
	ns := gd.pg.Namespace
	get := func(name string) *lockv1.CompositePodGroup {
		if cd := b.composites[types.NamespacedName{Namespace: ns, Name: name}]; cd != nil {
			return cd.c
		}
		return nil
	}
	root, _, why := podgroup.RootOf(parent, get)
	if root == nil {
		return nil, &ObjectError{Where: gd.where, Object: "PodGroup " + ns + "/" + gd.pg.Name, Errs: field.ErrorList{field.Invalid(field.NewPath("spec", "parentCompositePodGroupName"), parent,
			why+" in the "+b.where()+": give the whole tree")}}
	}
	key := types.NamespacedName{Namespace: ns, Name: root.Name}
	tree, seen := trees[key]
	if !seen {
		tree = &Job{Kind: KindCompositePodGroup, Namespace: ns, Name: root.Name, UID: types.UID("cpg-" + ns + "-" + root.Name), Priority: j.Priority, Template: "pods", Tree: root}
		for _, cd := range b.composites {
			if cd.c.Namespace != ns {
				continue
			}
			if r, _, _ := podgroup.RootOf(cd.c.Name, get); r == root {
				tree.Composites = append(tree.Composites, cd.c)
			}
		}
		sort.Slice(tree.Composites, func(i, k int) bool { return tree.Composites[i].Name < tree.Composites[k].Name })
		trees[key] = tree
	}
	tree.Pods = append(tree.Pods, j.Pods...)
	tree.GroupOf = append(tree.GroupOf, j.GroupOf...)
	tree.Gangs = append(tree.Gangs, j.Gangs...)
	tree.Need += j.Need
	tree.Priority = min(tree.Priority, j.Priority)
	if seen {
		return nil, nil
	}
	return tree, nil
}

// duration reads a duration annotation of meta at path; ok false when
// it is absent.
func duration(annotations map[string]string, key string, path *field.Path) (time.Duration, bool, *field.Error) {
	v, ok := annotations[key]
	if !ok {
		return 0, false, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, true, field.Invalid(path.Key(key), v, "not a Go duration (e.g. 90s, 45m, 2h30m)")
	}
	if d < 0 {
		return 0, true, field.Invalid(path.Key(key), v, "must not be negative")
	}
	return d, true, nil
}

// checkpointing reads CheckpointIntervalAnnotation and
// CheckpointDurationAnnotation (1m by default for a job that saves).
func checkpointing(annotations map[string]string) (every, save time.Duration, errs field.ErrorList) {
	meta := field.NewPath("metadata", "annotations")
	every, _, err := duration(annotations, CheckpointIntervalAnnotation, meta)
	if err != nil {
		errs = append(errs, err)
	}
	save, set, err := duration(annotations, CheckpointDurationAnnotation, meta)
	if err != nil {
		errs = append(errs, err)
	}
	switch {
	case set && every == 0:
		errs = append(errs, field.Required(meta.Key(CheckpointIntervalAnnotation), "a job that takes "+save.String()+" to save must say how often it saves"))
	case every > 0 && !set:
		save = time.Minute
	}
	return every, save, errs
}

// podInterval reads PodIntervalAnnotation.
func podInterval(obj map[string]string) (time.Duration, field.ErrorList) {
	d, _, err := duration(obj, PodIntervalAnnotation, field.NewPath("metadata", "annotations"))
	if err != nil {
		return 0, field.ErrorList{err}
	}
	return d, nil
}

// timing reads a job's arrival and runtime: from the object's
// annotations, the runtime else from its pod template's, else the
// default.
func (b *builder) timing(obj, template map[string]string, templatePath *field.Path) (arrival, runtime time.Duration, errs field.ErrorList) {
	meta := field.NewPath("metadata", "annotations")
	arrival, _, err := duration(obj, ArrivalAnnotation, meta)
	if err != nil {
		errs = append(errs, err)
	}
	runtime, ok, err := duration(obj, RuntimeAnnotation, meta)
	if err != nil {
		errs = append(errs, err)
	}
	if !ok && templatePath != nil {
		runtime, ok, err = duration(template, RuntimeAnnotation, templatePath.Child("metadata", "annotations"))
		if err != nil {
			errs = append(errs, err)
		}
	}
	if !ok && len(errs) == 0 {
		if b.opts.DefaultRuntime <= 0 && !b.opts.Live {
			errs = append(errs, field.Required(meta.Key(RuntimeAnnotation),
				"how long the job runs once its pods run together (a Go duration); set it on the object or its pod template, or pass --default-runtime"))
		}
		runtime = b.opts.DefaultRuntime
	}
	if ok && runtime == 0 {
		errs = append(errs, field.Invalid(meta.Key(RuntimeAnnotation), "0s", "a job must run for some time"))
	}
	return arrival, runtime, errs
}

// ReadSources reads manifest files ("-": stdin) as Load takes them.
func ReadSources(files []string, stdin io.Reader) ([]Source, error) {
	var out []Source
	for _, name := range files {
		var b []byte
		var err error
		if name == "-" {
			b, err = io.ReadAll(stdin)
			name = "<stdin>"
		} else {
			b, err = os.ReadFile(name)
			name = filepath.Clean(name)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, Source{Name: name, Data: b})
	}
	return out, nil
}
