package audit

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/lockstep-dev/lockstep/internal/dra"
)

// devices counts devices by resource: an extended resource's name
// (nvidia.com/gpu, vpc.amazonaws.com/efa) or a DRA DeviceClass's.
type devices map[string]int64

func (d devices) add(o devices, sign int64) {
	for k, v := range o {
		d[k] += sign * v
		if d[k] == 0 {
			delete(d, k)
		}
	}
}

func (d devices) clone() devices {
	out := make(devices, len(d))
	for k, v := range d {
		out[k] = v
	}
	return out
}

func (d devices) total() int64 {
	var n int64
	for _, v := range d {
		n += v
	}
	return n
}

// keys are the resources, sorted.
func (d devices) keys() []string {
	out := make([]string, 0, len(d))
	for k := range d {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// extended are the pod's requests of extended resources (a device
// plugin's, or one a DRA DeviceClass maps: either way the pod asks for it
// by name), as the scheduler sums them over containers.
func extended(p *corev1.Pod) devices {
	d := devices{}
	for name, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}) {
		if isExtended(name) && q.Value() > 0 {
			d[string(name)] = q.Value()
		}
	}
	return d
}

// isExtended: a domain-qualified name outside kubernetes.io (cpu, memory,
// hugepages-* and ephemeral-storage are native).
func isExtended(name corev1.ResourceName) bool {
	s := string(name)
	return strings.Contains(s, "/") && !strings.Contains(s, "kubernetes.io/") && !strings.HasPrefix(s, "requests.")
}

// claimUse is one of a pod's claims and the devices it holds or asks for.
type claimUse struct {
	// key identifies the claim (namespace/name), so a claim several pods
	// share counts once.
	key     string
	devices devices
	// estimated says why the count is not the allocation's.
	estimated string
}

// claimIndex finds claims and templates by namespace/name.
type claimIndex struct {
	claims    map[string]*resourcev1.ResourceClaim
	templates map[string]*resourcev1.ResourceClaimTemplate
}

func newClaimIndex(in *Input) claimIndex {
	ci := claimIndex{claims: map[string]*resourcev1.ResourceClaim{}, templates: map[string]*resourcev1.ResourceClaimTemplate{}}
	for _, c := range in.Claims {
		ci.claims[c.Namespace+"/"+c.Name] = c
	}
	for _, t := range in.ClaimTemplates {
		ci.templates[t.Namespace+"/"+t.Name] = t
	}
	return ci
}

// claimsOf are the pod's claims: the devices each allocation holds; for a
// claim not allocated (yet) those it requests; for one that is gone
// (deleted with its finished pod) those its template requests.
func (ci claimIndex) claimsOf(p *corev1.Pod) []claimUse {
	var out []claimUse
	for _, pc := range p.Spec.ResourceClaims {
		name := claimName(p, pc)
		if c := ci.claims[p.Namespace+"/"+name]; name != "" && c != nil {
			out = append(out, claimUse{key: p.Namespace + "/" + name, devices: claimDevices(c)})
			continue
		}
		if pc.ResourceClaimTemplateName == nil {
			continue
		}
		if t := ci.templates[p.Namespace+"/"+*pc.ResourceClaimTemplateName]; t != nil {
			out = append(out, claimUse{key: string(p.UID) + "/" + pc.Name, devices: requested(t.Spec.Spec),
				estimated: "the devices of claims deleted with their pods are counted from the claims' templates"})
		}
	}
	return out
}

// claimName is the name of the ResourceClaim a pod claim resolves to, ""
// when not known (not generated yet).
func claimName(p *corev1.Pod, pc corev1.PodResourceClaim) string {
	if pc.ResourceClaimName != nil {
		return *pc.ResourceClaimName
	}
	for _, s := range p.Status.ResourceClaimStatuses {
		if s.Name == pc.Name && s.ResourceClaimName != nil {
			return *s.ResourceClaimName
		}
	}
	return ""
}

// claimDevices are the devices a claim's allocation holds by the
// DeviceClass of the request each answers, or those it requests while not
// allocated.
func claimDevices(c *resourcev1.ResourceClaim) devices {
	if c.Status.Allocation == nil {
		return requested(c.Spec)
	}
	d := devices{}
	for _, r := range c.Status.Allocation.Devices.Results {
		d[classOf(c.Spec, r.Request, r.Driver)]++
	}
	return d
}

// classOf is the DeviceClass of request ("req" or "req/subrequest"); the
// driver when the request is not in the spec.
func classOf(spec resourcev1.ResourceClaimSpec, request, driver string) string {
	main, sub, _ := strings.Cut(request, "/")
	for _, r := range spec.Devices.Requests {
		if r.Name != main {
			continue
		}
		if r.Exactly != nil {
			return r.Exactly.DeviceClassName
		}
		for _, s := range r.FirstAvailable {
			if s.Name == sub {
				return s.DeviceClassName
			}
		}
	}
	return driver
}

// requested are the devices a claim spec asks for (dra.Demands): each
// request's first choice and its count; a request for All devices of a
// class counts as one (how many there are is the allocator's).
func requested(spec resourcev1.ResourceClaimSpec) devices {
	d := devices{}
	for _, r := range dra.Demands(&spec) {
		d[r.Classes[0]] += max(r.Count, 1)
	}
	return d
}
