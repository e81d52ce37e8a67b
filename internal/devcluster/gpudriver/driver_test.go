package gpudriver

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
)

func testDriver(t *testing.T) *Driver {
	t.Helper()
	dir := t.TempDir()
	cfg := Config{Node: "real-0", Devices: 2, KubeletDir: filepath.Join(dir, "kubelet"), CDIDir: filepath.Join(dir, "cdi"), StateDir: filepath.Join(dir, "driver")}
	if err := cfg.complete(); err != nil {
		t.Fatal(err)
	}
	d := &Driver{cfg: cfg, prepared: map[types.UID]PreparedClaim{}}
	if err := d.writeDevices(); err != nil {
		t.Fatal(err)
	}
	return d
}

func claim(uid, pool string, devices ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "c-" + uid, UID: types.UID(uid)}}
	c.Status.Allocation = &resourceapi.AllocationResult{}
	for _, d := range devices {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
			resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: DefaultDriver, Pool: pool, Device: d})
	}
	return c
}

// TestPrepareHandsTheKubeletEachDevicesCDIID: a claim's devices on this node
// become CDI IDs and are recorded; one on another node's pool is an error;
// an unallocated claim is an error; unpreparing forgets, twice is fine, and
// a new driver reading the record knows what its predecessor prepared.
func TestPrepareHandsTheKubeletEachDevicesCDIID(t *testing.T) {
	d := testDriver(t)
	res, err := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{
		claim("a", "real-0", "gpu-0", "gpu-1"), claim("b", "real-1", "gpu-0"), {ObjectMeta: metav1.ObjectMeta{Name: "c", UID: "c"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []kubeletplugin.Device{
		{Requests: []string{"gpu"}, PoolName: "real-0", DeviceName: "gpu-0", CDIDeviceIDs: []string{"gpu.example.com/gpu=gpu-0"}},
		{Requests: []string{"gpu"}, PoolName: "real-0", DeviceName: "gpu-1", CDIDeviceIDs: []string{"gpu.example.com/gpu=gpu-1"}},
	}
	if diff := cmp.Diff(want, res["a"].Devices); diff != "" || res["a"].Err != nil {
		t.Errorf("claim a: %v (-want,+got):\n%s", res["a"].Err, diff)
	}
	if res["b"].Err == nil || res["c"].Err == nil {
		t.Errorf("want errors for a device of another node and an unallocated claim, got %v, %v", res["b"].Err, res["c"].Err)
	}
	got, err := Prepared(d.cfg.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[types.UID]PreparedClaim{"a": {Namespace: "ml", Name: "c-a", Devices: []string{"gpu-0", "gpu-1"}}}, got); diff != "" {
		t.Errorf("record (-want,+got):\n%s", diff)
	}

	next := &Driver{cfg: d.cfg}
	if err := next.load(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		out, err := next.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{{UID: "a"}})
		if err != nil || out["a"] != nil {
			t.Fatalf("unprepare: %v, %v", err, out["a"])
		}
	}
	if got, _ := Prepared(d.cfg.StateDir); len(got) != 0 {
		t.Errorf("after unprepare the record still holds %v", got)
	}
}

// TestCDISpecInjectsEachDevice: the CDI spec gives each device its variable
// and its file, read-only, under the container's devices directory.
func TestCDISpecInjectsEachDevice(t *testing.T) {
	d := testDriver(t)
	b, err := os.ReadFile(filepath.Join(d.cfg.CDIDir, "gpu.example.com-gpu.json"))
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Kind    string `json:"kind"`
		Devices []struct {
			Name           string `json:"name"`
			ContainerEdits struct {
				Env    []string `json:"env"`
				Mounts []struct {
					HostPath, ContainerPath string
					Options                 []string
				} `json:"mounts"`
			} `json:"containerEdits"`
		} `json:"devices"`
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	if spec.Kind != "gpu.example.com/gpu" || len(spec.Devices) != 2 {
		t.Fatalf("spec %s with %d devices, want kind gpu.example.com/gpu with 2", spec.Kind, len(spec.Devices))
	}
	dev := spec.Devices[1]
	m := dev.ContainerEdits.Mounts
	if dev.Name != "gpu-1" || !cmp.Equal(dev.ContainerEdits.Env, []string{"GPU_DEVICE_1=gpu-1"}) || len(m) != 1 ||
		m[0].ContainerPath != "/run/lockstep/devices/gpu-1" || !cmp.Equal(m[0].Options, []string{"ro", "bind"}) {
		t.Errorf("device %+v: want GPU_DEVICE_1=gpu-1 and /run/lockstep/devices/gpu-1 read-only", dev)
	}
	if _, err := os.Stat(m[0].HostPath); err != nil {
		t.Errorf("the device file: %v", err)
	}
}

// TestUnhealthyList: the list is read line by line, blanks ignored, sorted,
// each once; no file is no unhealthy device.
func TestUnhealthyList(t *testing.T) {
	d := testDriver(t)
	if got := d.unhealthy(); got != nil {
		t.Errorf("no file: %v", got)
	}
	if err := os.WriteFile(filepath.Join(d.cfg.StateDir, UnhealthyFile), []byte("gpu-1\n\n gpu-0 \ngpu-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := d.unhealthy(); !cmp.Equal(got, []string{"gpu-0", "gpu-1"}) {
		t.Errorf("got %v", got)
	}
}
