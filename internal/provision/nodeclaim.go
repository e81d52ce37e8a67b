package provision

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// Lockstep's marks on the NodeClaims it creates.
const (
	// RequestLabel names the request a NodeClaim is part of: the set
	// created together and released together.
	RequestLabel = "scheduling.lockstep.dev/provision-request"
	// UnitLabel is a hash of the unit (its key) a NodeClaim was made for;
	// UnitAnnotation names it (namespace/name).
	UnitLabel      = "scheduling.lockstep.dev/provisioned-for"
	UnitAnnotation = "scheduling.lockstep.dev/provisioned-for"
	// CountAnnotation is how many NodeClaims the request has: one missing
	// is one Karpenter deleted (a launch that failed).
	CountAnnotation = "scheduling.lockstep.dev/provision-count"
	// CreatedByLabel marks every NodeClaim Lockstep made: Lockstep never
	// deletes one without it.
	CreatedByLabel = "app.kubernetes.io/created-by"
	CreatedBy      = "lockstep"
)

// UnitHash is the label value of a unit key.
func UnitHash(unit string) string { return podgroup.UnitHash(unit) }

// NodeClaimName is the name of a request's i-th NodeClaim: as short as
// Karpenter's own (<nodepool>-<random>), since node names derive from it
// and labels of the node name must stay within 63 characters, and
// deterministic, so that creating it twice is AlreadyExists, not a second
// node.
func NodeClaimName(pool, requestID string, i int) string {
	sum := sha256.Sum256([]byte(requestID + "/" + strconv.Itoa(i)))
	return pool + "-" + strings.ToLower(base32.HexEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:])[:6])
}

// ReservedFor is the taint that keeps every pod but the unit's off a node
// asked for on its behalf.
func ReservedFor(unit string) corev1.Taint {
	return corev1.Taint{Key: v1beta1.ReservedForTaint, Value: UnitHash(unit), Effect: corev1.TaintEffectNoSchedule}
}

// RequestID names the attempt-th request of a unit.
func RequestID(unit string, attempt int) string {
	return fmt.Sprintf("%s-%d", UnitHash(unit)[:10], attempt)
}

// nodeClaimSpec is the part of karpenter.sh/v1 NodeClaim's spec Lockstep
// writes.
type nodeClaimSpec struct {
	Requirements           []corev1.NodeSelectorRequirement `json:"requirements"`
	Taints                 []corev1.Taint                   `json:"taints,omitempty"`
	StartupTaints          []corev1.Taint                   `json:"startupTaints,omitempty"`
	NodeClassRef           map[string]any                   `json:"nodeClassRef"`
	ExpireAfter            any                              `json:"expireAfter,omitempty"`
	TerminationGracePeriod any                              `json:"terminationGracePeriod,omitempty"`
}

// NodeClaims are the NodeClaims of a request made for unit (its key), as
// Karpenter makes them for its NodePool: the template's labels, taints,
// startup taints, node class, expiry and hash annotations, requirements
// narrowed to the offering's instance type, zone and capacity type, and
// owned by the NodePool. They are named after the request (creating one
// twice is AlreadyExists, not a second node) and carry Karpenter's
// do-not-disrupt until the unit binds: no consolidation takes a node held
// for a gang that is forming — and the reserved-for taint, its value the
// unit's hash: no other pod takes a node held for the gang before it binds
// (Lockstep tolerates it for that unit alone).
func NodeClaims(r Request, unit, requestID string) ([]*unstructured.Unstructured, error) {
	np := r.Offering.NodePool
	reqs := append([]corev1.NodeSelectorRequirement(nil), np.Requirements...)
	for _, fixed := range []corev1.NodeSelectorRequirement{
		{Key: NodePoolLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{np.Name}},
		{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{r.Offering.InstanceType.Name}},
		{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{r.Offering.Zone}},
		{Key: CapacityTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{r.Offering.CapacityType}},
	} {
		if len(fixed.Values[0]) == 0 {
			continue
		}
		kept := reqs[:0]
		for _, q := range reqs {
			if q.Key != fixed.Key {
				kept = append(kept, q)
			}
		}
		reqs = append(kept, fixed)
	}
	sort.SliceStable(reqs, func(i, j int) bool { return reqs[i].Key < reqs[j].Key })
	var out []*unstructured.Unstructured
	for i := 0; i < r.Count; i++ {
		labels := map[string]string{}
		for k, v := range np.Labels {
			labels[k] = v
		}
		labels[NodePoolLabel] = np.Name
		labels[RequestLabel] = requestID
		labels[UnitLabel] = UnitHash(unit)
		labels[CreatedByLabel] = CreatedBy
		annotations := map[string]string{UnitAnnotation: unit, DoNotDisruptAnnotation: "true", CountAnnotation: strconv.Itoa(r.Count)}
		for k, v := range np.Annotations {
			annotations[k] = v
		}
		taints := append(slices.Clip(np.Taints), ReservedFor(unit))
		spec := nodeClaimSpec{Requirements: reqs, NodeClassRef: np.NodeClassRef, Taints: taints, StartupTaints: np.StartupTaints,
			ExpireAfter: np.ExpireAfter, TerminationGracePeriod: np.TerminationGracePeriod}
		specObj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&spec)
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": NodeClaimResource.GroupVersion().String(),
			"kind":       "NodeClaim",
			"spec":       specObj,
		}}
		u.SetName(NodeClaimName(np.Name, requestID, i))
		u.SetLabels(labels)
		u.SetAnnotations(annotations)
		if np.UID != "" {
			u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: NodePoolResource.GroupVersion().String(), Kind: "NodePool", Name: np.Name, UID: np.UID, BlockOwnerDeletion: ptr.To(true)}})
		}
		out = append(out, u)
	}
	return out, nil
}
