package scheduler

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/lockstep-dev/lockstep/internal/queue"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// Without an autoscaler Lockstep drives, a gang that does not fit says how
// many more nodes of which group would make it fit — planned as nodes like
// the group's own, with their devices — and says nothing of the kind when
// no group's nodes would help or the unit is a lone pod.
func TestUnplacedGangSaysWhatMoreNodesItNeeds(t *testing.T) {
	const spec = `
nodePools:
- name: gpu
  count: 2
  capacity: {cpu: "16", memory: 64Gi, pods: "110"}
  labels: {node.kubernetes.io/instance-type: gpu-2x, topology.kubernetes.io/zone: zone-a}
  devices: [{driver: gpu.example.com, count: 2}]
- name: cpu
  count: 3
  capacity: {cpu: "16", memory: 64Gi, pods: "110"}
`
	for _, tc := range []struct {
		name     string
		objs     []runtime.Object
		key      queue.Key
		pod      string
		contains string // "" : no shortfall said
	}{{
		name:     "gang of 7 one-GPU ranks on 4 GPUs",
		objs:     objects(gpuPods("ml", "train", "train", 7, 0), []runtime.Object{builders.GangPodGroup("ml", "train", 7)}),
		key:      queue.GroupKey("ml", "train"),
		pod:      "train-0",
		contains: "more nodes would make it fit: 2 more nodes of node pool gpu (gpu-2x in zone-a)",
	}, {
		name: "gang whose nodes are all taken by a higher priority",
		objs: objects(gpuPods("ml", "train", "train", 2, 0), []runtime.Object{builders.GangPodGroup("ml", "train", 2)},
			running(gpuPods("prod", "", "serve", 2, 1000), "gpu-0", 0), running(gpuPods("prod", "", "serve-b", 2, 1000), "gpu-1", 0)),
		key:      queue.GroupKey("ml", "train"),
		pod:      "train-0",
		contains: "more nodes would make it fit: 1 more node of node pool gpu (gpu-2x in zone-a)",
	}, {
		name: "lone pod",
		objs: objects(running(gpuPods("prod", "", "serve", 2, 1000), "gpu-0", 0), running(gpuPods("prod", "", "serve-b", 2, 1000), "gpu-1", 0), gpuPods("ml", "", "solo", 1, 0)),
		key:  queue.PodKey("ml", "solo-0"),
		pod:  "solo-0",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, spec, tc.objs...)
			f.run(tc.key)
			got := podScheduled(f.pod("ml", tc.pod))
			if !strings.HasPrefix(got, "False/Unschedulable: ") {
				t.Fatalf("PodScheduled %q, want Unschedulable", got)
			}
			if tc.contains == "" {
				if strings.Contains(got, "more nodes") {
					t.Errorf("PodScheduled %q, want no shortfall said", got)
				}
				return
			}
			// The pods' messages point to the group's condition, which
			// says it.
			if got := condition(f.group("ml", "train")); !strings.Contains(got, tc.contains) {
				t.Errorf("group condition %q, want it to contain %q", got, tc.contains)
			}
		})
	}
}
