package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

// failureDoc is the Failure kind as written:
//
//	apiVersion: sim.lockstep.dev/v1alpha1
//	kind: Failure
//	metadata: {name: gpu-3-down}
//	spec:
//	  at: 36h              # when, after the start
//	  node: gpu-3          # the node that fails …
//	  device: gpu-5        # … or only this device of it (driver: needed when the node has several)
//	  repairAfter: 4h      # back after this long; without it, for ever
type failureDoc struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		At          string `json:"at"`
		Node        string `json:"node"`
		Driver      string `json:"driver,omitempty"`
		Device      string `json:"device,omitempty"`
		RepairAfter string `json:"repairAfter,omitempty"`
	} `json:"spec"`
}

func (d *failureDoc) failure() (Failure, field.ErrorList) {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	f := Failure{Name: d.Name, Node: d.Spec.Node, Driver: d.Spec.Driver, Device: d.Spec.Device}
	at, err := parseDuration(d.Spec.At, spec.Child("at"), true)
	if err != nil {
		errs = append(errs, err)
	}
	f.At = at
	if d.Spec.RepairAfter != "" {
		r, err := parseDuration(d.Spec.RepairAfter, spec.Child("repairAfter"), true)
		if err != nil {
			errs = append(errs, err)
		} else if r == 0 {
			errs = append(errs, field.Invalid(spec.Child("repairAfter"), d.Spec.RepairAfter, "must be positive; omit it for a failure that lasts"))
		}
		f.RepairAfter = r
	}
	if f.Node == "" {
		errs = append(errs, field.Required(spec.Child("node"), "the node that fails (or whose device fails)"))
	}
	if f.Driver != "" && f.Device == "" {
		errs = append(errs, field.Required(spec.Child("device"), "driver names the driver of a device: name the device too, or drop driver to fail the node"))
	}
	return f, errs
}

func parseDuration(s string, path *field.Path, required bool) (time.Duration, *field.Error) {
	if s == "" {
		if required {
			return 0, field.Required(path, "a Go duration (e.g. 90s, 45m, 2h30m)")
		}
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, field.Invalid(path, s, "not a Go duration (e.g. 90s, 45m, 2h30m)")
	}
	if d < 0 {
		return 0, field.Invalid(path, s, "must not be negative")
	}
	return d, nil
}

// MixDoc is a generator of a large synthetic job mix, written among the
// manifests of a workload:
//
//	apiVersion: sim.lockstep.dev/v1alpha1
//	kind: Mix
//	metadata: {name: week, namespace: ml}
//	spec:
//	  seed: 1
//	  jobs: 10000
//	  span: 168h                    # arrivals spread uniformly at random over it
//	  deviceClass: gpu.example.com
//	  shapes:
//	  - name: small
//	    weight: 70                  # share of the jobs
//	    ranks: [1, 2, 4]            # pods per job, one picked at random
//	    devicesPerRank: [1, 2]
//	    cpuPerRank: "4"
//	    memoryPerRank: 16Gi
//	    runtime: {min: 10m, max: 4h}   # log-uniform
//	    priorityClassName: research
//	    annotations:                # on each of its jobs
//	      sim.lockstep.dev/checkpoint-interval: 30m
//	    declareRuntime: true        # scheduling.lockstep.dev/max-runtime: its runtime
//
// It expands into Indexed Jobs (parallelism = completions = ranks, one
// ResourceClaimTemplate per device count), the same for the same seed.
type MixDoc struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              MixSpec `json:"spec"`
}

// MixSpec is a Mix's spec.
type MixSpec struct {
	Seed        uint64     `json:"seed"`
	Jobs        int        `json:"jobs"`
	Span        string     `json:"span"`
	DeviceClass string     `json:"deviceClass,omitempty"`
	Shapes      []MixShape `json:"shapes"`
}

// MixShape is one kind of job of a mix.
type MixShape struct {
	Name              string             `json:"name"`
	Weight            int                `json:"weight"`
	Ranks             []int32            `json:"ranks"`
	DevicesPerRank    []int64            `json:"devicesPerRank,omitempty"`
	CPUPerRank        *resource.Quantity `json:"cpuPerRank,omitempty"`
	MemoryPerRank     *resource.Quantity `json:"memoryPerRank,omitempty"`
	Runtime           MixRange           `json:"runtime"`
	PriorityClassName string             `json:"priorityClassName,omitempty"`
	// Annotations are put on each of its jobs (a checkpoint interval, a
	// preemption notice, …).
	Annotations map[string]string `json:"annotations,omitempty"`
	// DeclareRuntime: each job declares its own runtime as
	// scheduling.lockstep.dev/max-runtime (what a team that knows its
	// jobs' lengths writes), so a preemptor may wait for it to end.
	DeclareRuntime bool `json:"declareRuntime,omitempty"`
}

// MixRange is a range of durations.
type MixRange struct {
	Min string `json:"min"`
	Max string `json:"max"`
}

func (m *MixDoc) validate() (span time.Duration, runtimes [][2]time.Duration, errs field.ErrorList) {
	spec := field.NewPath("spec")
	if m.Spec.Jobs < 1 {
		errs = append(errs, field.Invalid(spec.Child("jobs"), m.Spec.Jobs, "must be at least 1"))
	}
	span, err := parseDuration(m.Spec.Span, spec.Child("span"), true)
	if err != nil {
		errs = append(errs, err)
	}
	if len(m.Spec.Shapes) == 0 {
		errs = append(errs, field.Required(spec.Child("shapes"), "at least one job shape"))
	}
	for i, s := range m.Spec.Shapes {
		p := spec.Child("shapes").Index(i)
		if s.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), "names the shape's jobs: <mix>-<shape>-<n>"))
		}
		if s.Weight < 1 {
			errs = append(errs, field.Invalid(p.Child("weight"), s.Weight, "must be at least 1"))
		}
		if len(s.Ranks) == 0 {
			errs = append(errs, field.Required(p.Child("ranks"), "pods per job"))
		}
		for j, r := range s.Ranks {
			if r < 1 {
				errs = append(errs, field.Invalid(p.Child("ranks").Index(j), r, "must be at least 1"))
			}
		}
		for j, d := range s.DevicesPerRank {
			if d < 0 {
				errs = append(errs, field.Invalid(p.Child("devicesPerRank").Index(j), d, "must not be negative"))
			}
			if d > 0 && m.Spec.DeviceClass == "" {
				errs = append(errs, field.Required(spec.Child("deviceClass"), "the DeviceClass the ranks' devices come from"))
			}
		}
		lo, err1 := parseDuration(s.Runtime.Min, p.Child("runtime", "min"), true)
		hi, err2 := parseDuration(s.Runtime.Max, p.Child("runtime", "max"), true)
		for _, e := range []*field.Error{err1, err2} {
			if e != nil {
				errs = append(errs, e)
			}
		}
		if err1 == nil && err2 == nil && (lo <= 0 || hi < lo) {
			errs = append(errs, field.Invalid(p.Child("runtime"), s.Runtime, "need 0 < min ≤ max"))
		}
		runtimes = append(runtimes, [2]time.Duration{lo, hi})
	}
	return span, runtimes, errs
}

// generate expands the mix into Jobs and the claim templates they use.
func (m *MixDoc) generate(ns string) ([]*batchv1.Job, []*resourcev1.ResourceClaimTemplate, field.ErrorList) {
	span, runtimes, errs := m.validate()
	if len(errs) > 0 {
		return nil, nil, errs
	}
	rng := rand.New(rand.NewPCG(m.Spec.Seed, m.Spec.Seed^0x5eed))
	arrivals := make([]time.Duration, m.Spec.Jobs)
	for i := range arrivals {
		arrivals[i] = time.Duration(rng.Int64N(int64(span))).Round(time.Second)
	}
	sort.Slice(arrivals, func(i, j int) bool { return arrivals[i] < arrivals[j] })
	total := 0
	for _, s := range m.Spec.Shapes {
		total += s.Weight
	}
	templates := map[int64]*resourcev1.ResourceClaimTemplate{}
	jobs := make([]*batchv1.Job, 0, m.Spec.Jobs)
	for i, at := range arrivals {
		si := pickWeighted(rng, m.Spec.Shapes, total)
		s := m.Spec.Shapes[si]
		ranks := s.Ranks[rng.IntN(len(s.Ranks))]
		var devices int64
		if len(s.DevicesPerRank) > 0 {
			devices = s.DevicesPerRank[rng.IntN(len(s.DevicesPerRank))]
		}
		lo, hi := runtimes[si][0], runtimes[si][1]
		rt := time.Duration(math.Exp(math.Log(float64(lo)) + rng.Float64()*(math.Log(float64(hi))-math.Log(float64(lo))))).Round(time.Second)
		j := mixJob(ns, fmt.Sprintf("%s-%s-%05d", m.Name, s.Name, i), s, ranks, at, max(rt, time.Second))
		if devices > 0 {
			t := templates[devices]
			if t == nil {
				t = mixTemplate(ns, fmt.Sprintf("%s-%d-devices", m.Name, devices), m.Spec.DeviceClass, devices)
				templates[devices] = t
			}
			spec := &j.Spec.Template.Spec
			spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "devices", ResourceClaimTemplateName: ptr.To(t.Name)}}
			spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "devices"}}
		}
		jobs = append(jobs, j)
	}
	out := make([]*resourcev1.ResourceClaimTemplate, 0, len(templates))
	for _, t := range templates {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return jobs, out, nil
}

func pickWeighted(rng *rand.Rand, shapes []MixShape, total int) int {
	n := rng.IntN(total)
	for i, s := range shapes {
		if n < s.Weight {
			return i
		}
		n -= s.Weight
	}
	return len(shapes) - 1
}

func mixJob(ns, name string, s MixShape, ranks int32, arrival, runtime time.Duration) *batchv1.Job {
	req := corev1.ResourceList{}
	if s.CPUPerRank != nil {
		req[corev1.ResourceCPU] = *s.CPUPerRank
	}
	if s.MemoryPerRank != nil {
		req[corev1.ResourceMemory] = *s.MemoryPerRank
	}
	own := map[string]string{ArrivalAnnotation: arrival.String(), RuntimeAnnotation: runtime.String()}
	if s.DeclareRuntime {
		own[lockv1.MaxRuntimeAnnotation] = runtime.String()
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: shapeAnnotations(s, own)},
		Spec: batchv1.JobSpec{
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
			Parallelism:    ptr.To(ranks), Completions: ptr.To(ranks),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy:     corev1.RestartPolicyNever,
				PriorityClassName: s.PriorityClassName,
				Containers:        []corev1.Container{{Name: "rank", Image: "sim", Resources: corev1.ResourceRequirements{Requests: req}}},
			}},
		},
	}
}

func mixTemplate(ns, name, class string, count int64) *resourcev1.ResourceClaimTemplate {
	return &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "devices", Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count,
			}}},
		}}},
	}
}

// shapeAnnotations are a shape's annotations with the job's own over
// them.
func shapeAnnotations(s MixShape, own map[string]string) map[string]string {
	out := make(map[string]string, len(s.Annotations)+len(own))
	for k, v := range s.Annotations {
		out[k] = v
	}
	for k, v := range own {
		out[k] = v
	}
	return out
}
