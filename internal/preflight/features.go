package preflight

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Answers of the DRA feature table's THIS CLUSTER column.
const (
	Served    = "served"
	NotServed = "not served"
	Unknown   = "unknown"
)

// DRAFeature is one row of the DRA feature table: whether this cluster
// serves a feature "DRA is GA" does not imply, and what Lockstep does with
// it.
type DRAFeature struct {
	Feature string `json:"feature"`
	Gate    string `json:"gate"`
	// Cluster is served, not served or unknown; Evidence says how that was
	// found (a dry-run kept or dropped the field, discovery, the API
	// server's kubernetes_feature_enabled metric).
	Cluster  string `json:"cluster"`
	Evidence string `json:"evidence"`
	// Lockstep is what Lockstep does with the feature; Without what is
	// lost where the cluster does not serve it.
	Lockstep string `json:"lockstep"`
	Without  string `json:"without,omitempty"`
}

// probeDriver names the driver of the dry-run ResourceSlices; nothing is
// ever stored.
const probeDriver = "preflight.lockstep.dev"

// draFeatures probes, one dry run or read each, which of the DRA features
// beyond the GA core this API server serves. A write the caller may not
// make, or a metric it may not read, gives unknown.
func draFeatures(ctx context.Context, client kubernetes.Interface) []DRAFeature {
	gates, gatesErr := apiserverGates(ctx, client)
	rows := []DRAFeature{
		taintRuleRow(client),
		sliceRow(ctx, client, DRAFeature{Feature: "device taints in slices", Gate: "DRADeviceTaints",
			Lockstep: "never allocates a tainted device; a NoExecute taint on a member's device restarts its gang whole",
			Without:  "drivers cannot take one failed device out of service; the node goes"},
			func(s *resourcev1.ResourceSlice) {
				s.Spec.Devices = []resourcev1.Device{{Name: "d", Taints: []resourcev1.DeviceTaint{{Key: "preflight.lockstep.dev/probe", Effect: resourcev1.DeviceTaintEffectNoSchedule}}}}
			},
			func(s *resourcev1.ResourceSlice) bool {
				return len(s.Spec.Devices) == 1 && len(s.Spec.Devices[0].Taints) > 0
			}),
		healthRow(gates, gatesErr),
		sliceRow(ctx, client, DRAFeature{Feature: "partitionable devices", Gate: "DRAPartitionableDevices",
			Lockstep: "allocates partitions (MIG) through their shared counters; counts a partitioned device once, by capacity",
			Without:  "drivers cannot publish overlapping partitions of one device"},
			func(s *resourcev1.ResourceSlice) {
				s.Spec.SharedCounters = []resourcev1.CounterSet{{Name: "probe", Counters: map[string]resourcev1.Counter{"memory": {Value: resource.MustParse("1Gi")}}}}
			},
			func(s *resourcev1.ResourceSlice) bool { return len(s.Spec.SharedCounters) > 0 }),
		sliceRow(ctx, client, DRAFeature{Feature: "consumable capacity", Gate: "DRAConsumableCapacity",
			Lockstep: "shares a device among claims by the capacity each consumes",
			Without:  "a device is allocated to one claim, whole"},
			func(s *resourcev1.ResourceSlice) {
				s.Spec.Devices = []resourcev1.Device{{Name: "d", AllowMultipleAllocations: ptr.To(true),
					Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse("1Gi")}}}}
			},
			func(s *resourcev1.ResourceSlice) bool {
				return len(s.Spec.Devices) == 1 && s.Spec.Devices[0].AllowMultipleAllocations != nil
			}),
		sliceRow(ctx, client, DRAFeature{Feature: "binding conditions", Gate: "DRADeviceBindingConditions",
			Lockstep: "binds a gang's pods only once their devices' binding conditions are met, or rolls the gang back",
			Without:  "devices that need preparation before use (fabric-attached) cannot say so"},
			func(s *resourcev1.ResourceSlice) {
				s.Spec.Devices = []resourcev1.Device{{Name: "d", BindingConditions: []string{"ready"}, BindingFailureConditions: []string{"failed"}}}
			},
			func(s *resourcev1.ResourceSlice) bool {
				return len(s.Spec.Devices) == 1 && len(s.Spec.Devices[0].BindingConditions) > 0
			}),
		extendedRow(ctx, client),
	}
	return rows
}

func taintRuleRow(client kubernetes.Interface) DRAFeature {
	row := DRAFeature{Feature: "DeviceTaintRule API", Gate: "DRADeviceTaintRules",
		Lockstep: "reads DeviceTaintRules like slice taints (allocation, integrity, explain)",
		Without:  "an administrator cannot taint a device the driver does not"}
	switch {
	case served(client, "resource.k8s.io/v1", "devicetaintrules"):
		row.Cluster, row.Evidence = Served, "resource.k8s.io/v1 devicetaintrules discovered"
	case served(client, "resource.k8s.io/v1beta2", "devicetaintrules"):
		// Served, but not in the version Lockstep reads: say so rather
		// than promise what the components do not do.
		row.Cluster, row.Evidence = Served, "resource.k8s.io/v1beta2 devicetaintrules discovered, not resource.k8s.io/v1"
		row.Lockstep = "does not read them: Lockstep reads resource.k8s.io/v1 DeviceTaintRules only; slice taints still apply"
		row.Without = "a device tainted only by a v1beta2 DeviceTaintRule is still allocated by Lockstep; taint it in its ResourceSlice (the driver) or upgrade the control plane"
	default:
		row.Cluster, row.Evidence = NotServed, "no devicetaintrules resource in resource.k8s.io"
	}
	return row
}

// sliceRow dry-runs a ResourceSlice that set modifies and reports the
// feature served when kept finds the field in what the API server returned
// (a disabled gate drops it silently).
func sliceRow(ctx context.Context, client kubernetes.Interface, row DRAFeature, set func(*resourcev1.ResourceSlice), kept func(*resourcev1.ResourceSlice) bool) DRAFeature {
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "lockstep-preflight-"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver: probeDriver, AllNodes: ptr.To(true),
			Pool: resourcev1.ResourcePool{Name: "probe", Generation: 1, ResourceSliceCount: 1},
		},
	}
	set(s)
	out, err := client.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case err != nil:
		row.Cluster, row.Evidence = Unknown, "dry-run of a ResourceSlice failed: "+err.Error()
	case kept(out):
		row.Cluster, row.Evidence = Served, "a dry-run ResourceSlice kept the field"
	default:
		row.Cluster, row.Evidence = NotServed, "a dry-run ResourceSlice lost the field (gate off in kube-apiserver)"
	}
	return row
}

func extendedRow(ctx context.Context, client kubernetes.Interface) DRAFeature {
	row := DRAFeature{Feature: "extended-resource classes", Gate: "DRAExtendedResource",
		Lockstep: "serves a pod's extended-resource request (nvidia.com/gpu: 1) from DRA devices of the class that names it",
		Without:  "a pool moves to DRA only with its manifests rewritten to claims"}
	dc := &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "lockstep-preflight-"},
		Spec:       resourcev1.DeviceClassSpec{ExtendedResourceName: ptr.To("preflight.lockstep.dev/probe")},
	}
	out, err := client.ResourceV1().DeviceClasses().Create(ctx, dc, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case err != nil:
		row.Cluster, row.Evidence = Unknown, "dry-run of a DeviceClass failed: "+err.Error()
	case out.Spec.ExtendedResourceName != nil:
		row.Cluster, row.Evidence = Served, "a dry-run DeviceClass kept spec.extendedResourceName"
	default:
		row.Cluster, row.Evidence = NotServed, "a dry-run DeviceClass lost spec.extendedResourceName (gate off in kube-apiserver)"
	}
	return row
}

// healthRow: a pod status field no dry run can show, so the API server's
// own report of its gates decides.
func healthRow(gates map[string]bool, err error) DRAFeature {
	row := DRAFeature{Feature: "device health in pod status", Gate: "ResourceHealthStatus",
		Lockstep: "ends a gang's incarnation when a member's device turns Unhealthy (DeviceUnhealthy); explain shows device health",
		Without:  "an unhealthy device is seen only once its driver taints it"}
	on, known := gates["ResourceHealthStatus"]
	switch {
	case err != nil:
		row.Cluster, row.Evidence = Unknown, "cannot read the API server's /metrics: "+err.Error()
	case !known:
		row.Cluster, row.Evidence = Unknown, "the API server's /metrics does not report the gate"
	case on:
		row.Cluster, row.Evidence = Served, "kube-apiserver reports kubernetes_feature_enabled 1 (kubelets need the gate too; on by default from 1.36)"
	default:
		row.Cluster, row.Evidence = NotServed, "kube-apiserver reports kubernetes_feature_enabled 0: it drops allocatedResourcesStatus"
	}
	return row
}

// apiserverGates reads kubernetes_feature_enabled{name=…} from the API
// server's /metrics.
func apiserverGates(ctx context.Context, client kubernetes.Interface) (map[string]bool, error) {
	b, err := client.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	return parseFeatureMetric(b), nil
}

// parseFeatureMetric parses lines like
// kubernetes_feature_enabled{name="ResourceHealthStatus",stage="BETA"} 1.
func parseFeatureMetric(b []byte) map[string]bool {
	out := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	const prefix = "kubernetes_feature_enabled{"
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		labels, value, ok := strings.Cut(line[len(prefix):], "} ")
		if !ok {
			continue
		}
		for _, l := range strings.Split(labels, ",") {
			if k, v, ok := strings.Cut(l, "="); ok && k == "name" {
				out[strings.Trim(v, `"`)] = strings.TrimSpace(value) == "1"
			}
		}
	}
	return out
}

// featureSummary is the check line of the table: it never fails a cluster
// (Lockstep works without these), it says what is missing.
func featureSummary(rows []DRAFeature) Check {
	var missing, unknown []string
	for _, r := range rows {
		switch r.Cluster {
		case NotServed:
			missing = append(missing, r.Feature)
		case Unknown:
			unknown = append(unknown, r.Feature)
		}
	}
	c := Check{Name: "DRA features", Status: OK, Detail: fmt.Sprintf("all %d DRA features beyond the GA core served (table below)", len(rows))}
	if len(missing)+len(unknown) > 0 {
		c.Status = Info
		c.Detail = fmt.Sprintf("%d of %d served", len(rows)-len(missing)-len(unknown), len(rows))
		if len(missing) > 0 {
			c.Detail += "; not served: " + strings.Join(missing, ", ")
		}
		if len(unknown) > 0 {
			c.Detail += "; unknown: " + strings.Join(unknown, ", ")
		}
		c.Detail += " (table below: what each loses)"
	}
	return c
}
