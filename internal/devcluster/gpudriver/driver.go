// Package gpudriver is the simulated-GPU DRA driver of the local cluster's
// real nodes (`lockstep dev up --real-nodes`): a kubelet plugin written with
// k8s.io/dynamic-resource-allocation/kubeletplugin, as a vendor's driver is.
//
// It publishes one ResourceSlice of Devices fake GPUs for its node with the
// attributes the simulated nodes' GPUs carry (model, index, a PCIe root and
// an NVLink-style clique), prepares and unprepares claims through the
// kubelet's DRA gRPC, and hands each prepared device to the container through
// CDI: an environment variable GPU_DEVICE_<index>=<device> and a read-only
// file /run/lockstep/devices/<device> describing it. It reports device health
// through the kubelet's DRA health service: every device is healthy unless its
// name is a line of the file <state dir>/unhealthy, which is how a test or a
// user makes a device fail; such a device is also tainted NoSchedule in the
// ResourceSlice, so that no new claim gets it. What it prepared is recorded in
// <state dir>/prepared.json, so a restarted driver unprepares what its
// predecessor prepared and nothing is lost.
package gpudriver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// Defaults shared with the simulated nodes (internal/clusterspec/default.yaml).
const (
	DefaultDriver = "gpu.example.com"
	DefaultModel  = "sim-gpu"
	// ContainerDevicesDir is where a container finds one file per device it
	// was given.
	ContainerDevicesDir = "/run/lockstep/devices"
	// EnvPrefix starts the variable naming each device given to a container.
	EnvPrefix = "GPU_DEVICE_"
	// UnhealthyFile, in the state directory, lists the devices the driver
	// reports unhealthy, one name per line.
	UnhealthyFile = "unhealthy"
	// PreparedFile, in the state directory, records the prepared claims.
	PreparedFile = "prepared.json"
)

// Config is one node's driver.
type Config struct {
	// Node is the node's name; its pool has the same name.
	Node string
	// Driver is the driver name (and the DeviceClass the cluster creates).
	Driver string
	// Devices is how many GPUs the node has.
	Devices int
	// Model is the model attribute.
	Model string
	// KubeletDir is the kubelet's root directory: the driver registers in
	// its plugins_registry and serves under plugins/<driver>.
	KubeletDir string
	// CDIDir is where the node's container runtime reads CDI specs.
	CDIDir string
	// StateDir holds the device files, the unhealthy list and the record
	// of prepared claims.
	StateDir string
	// HealthEvery is how often health is re-read and re-sent; default 1 s
	// (the kubelet treats a report older than 30 s as unknown).
	HealthEvery time.Duration
}

func (c *Config) complete() error {
	if c.Node == "" || c.KubeletDir == "" || c.CDIDir == "" || c.StateDir == "" {
		return errors.New("node, kubelet directory, CDI directory and state directory are required")
	}
	if c.Driver == "" {
		c.Driver = DefaultDriver
	}
	if c.Model == "" {
		c.Model = DefaultModel
	}
	if c.Devices < 1 {
		return fmt.Errorf("devices: %d, want at least 1", c.Devices)
	}
	if c.HealthEvery == 0 {
		c.HealthEvery = time.Second
	}
	return nil
}

// DeviceName is the name of a node's index-th GPU.
func DeviceName(index int) string { return fmt.Sprintf("gpu-%d", index) }

// cdiKind is the CDI kind of the driver's devices, e.g. gpu.example.com/gpu.
func (c *Config) cdiKind() string { return c.Driver + "/gpu" }

// Devices are the devices the driver publishes for its node.
func (c *Config) devices() []resourceapi.Device {
	out := make([]resourceapi.Device, c.Devices)
	for i := range out {
		out[i] = resourceapi.Device{
			Name: DeviceName(i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"model":                           {StringValue: ptr.To(c.Model)},
				"index":                           {IntValue: ptr.To(int64(i))},
				"resource.kubernetes.io/pcieRoot": {StringValue: ptr.To(fmt.Sprintf("%s-pci-%d", c.Node, i/2))},
				"clique":                          {StringValue: ptr.To(c.Node + ".0")},
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: resource.MustParse("80Gi")},
			},
		}
	}
	return out
}

// Driver is a running driver.
type Driver struct {
	cfg    Config
	client kubernetes.Interface
	helper *kubeletplugin.Helper

	mu       sync.Mutex
	prepared map[types.UID]PreparedClaim
}

// PreparedClaim is what the driver prepared for one claim.
type PreparedClaim struct {
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Devices   []string `json:"devices"`
}

// Run starts the driver and serves until ctx ends; then it unregisters from
// the kubelet and leaves its ResourceSlice (a restarted driver takes it over).
func Run(ctx context.Context, client kubernetes.Interface, cfg Config) error {
	if err := cfg.complete(); err != nil {
		return err
	}
	logger := klog.FromContext(ctx).WithValues("driver", cfg.Driver, "node", cfg.Node)
	ctx = klog.NewContext(ctx, logger)
	d := &Driver{cfg: cfg, client: client, prepared: map[types.UID]PreparedClaim{}}
	if err := d.load(); err != nil {
		return err
	}
	if err := d.writeDevices(); err != nil {
		return err
	}
	node, err := client.CoreV1().Nodes().Get(ctx, cfg.Node, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading node %s: %w", cfg.Node, err)
	}
	pluginDir := filepath.Join(cfg.KubeletDir, "plugins", cfg.Driver)
	if err := os.MkdirAll(pluginDir, 0o750); err != nil {
		return err
	}
	helper, err := kubeletplugin.Start(ctx, d,
		kubeletplugin.KubeClient(client),
		kubeletplugin.NodeName(cfg.Node),
		kubeletplugin.NodeUID(node.UID),
		kubeletplugin.DriverName(cfg.Driver),
		kubeletplugin.RegistrarDirectoryPath(filepath.Join(cfg.KubeletDir, "plugins_registry")),
		kubeletplugin.PluginDataDirectoryPath(pluginDir),
	)
	if err != nil {
		return fmt.Errorf("starting the kubelet plugin: %w", err)
	}
	d.helper = helper
	defer helper.Stop()
	unhealthy := d.unhealthy()
	if err := d.publish(ctx, unhealthy); err != nil {
		return err
	}
	logger.Info("Simulated-GPU driver serving", "devices", cfg.Devices, "kubeletDir", cfg.KubeletDir, "unhealthy", unhealthy)
	t := time.NewTicker(cfg.HealthEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if now := d.unhealthy(); !slices.Equal(now, unhealthy) {
			if err := d.publish(ctx, now); err != nil {
				return err
			}
			unhealthy = now
		}
	}
}

// UnhealthyTaintKey taints, NoSchedule, a device the driver reports
// unhealthy, as vendors' drivers do, so that no new claim is allocated it;
// what already runs on it learns through the kubelet's health report.
const UnhealthyTaintKey = "gpu.example.com/unhealthy"

// publish publishes the node's ResourceSlice, the unhealthy devices tainted.
func (d *Driver) publish(ctx context.Context, unhealthy []string) error {
	devices := d.cfg.devices()
	for i := range devices {
		if slices.Contains(unhealthy, devices[i].Name) {
			devices[i].Taints = []resourceapi.DeviceTaint{{Key: UnhealthyTaintKey, Value: "true", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
		}
	}
	if err := d.helper.PublishResources(ctx, resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
		d.cfg.Node: {Slices: []resourceslice.Slice{{Devices: devices}}},
	}}); err != nil {
		return fmt.Errorf("publishing the ResourceSlice: %w", err)
	}
	return nil
}

// writeDevices writes each device's file and the CDI spec that injects it.
func (d *Driver) writeDevices() error {
	devDir := filepath.Join(d.cfg.StateDir, "devices")
	if err := os.MkdirAll(devDir, 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(d.cfg.CDIDir, 0o755); err != nil {
		return err
	}
	type mount struct {
		HostPath      string   `json:"hostPath"`
		ContainerPath string   `json:"containerPath"`
		Options       []string `json:"options"`
	}
	type edits struct {
		Env    []string `json:"env"`
		Mounts []mount  `json:"mounts"`
	}
	type device struct {
		Name           string `json:"name"`
		ContainerEdits edits  `json:"containerEdits"`
	}
	spec := struct {
		Version string   `json:"cdiVersion"`
		Kind    string   `json:"kind"`
		Devices []device `json:"devices"`
	}{Version: "0.6.0", Kind: d.cfg.cdiKind()}
	for i, dev := range d.cfg.devices() {
		file := filepath.Join(devDir, dev.Name)
		desc := fmt.Sprintf("device=%s node=%s driver=%s model=%s index=%d pcieRoot=%s clique=%s\n", dev.Name, d.cfg.Node, d.cfg.Driver,
			d.cfg.Model, i, *dev.Attributes["resource.kubernetes.io/pcieRoot"].StringValue, *dev.Attributes["clique"].StringValue)
		if err := os.WriteFile(file, []byte(desc), 0o644); err != nil {
			return err
		}
		spec.Devices = append(spec.Devices, device{Name: dev.Name, ContainerEdits: edits{
			Env:    []string{fmt.Sprintf("%s%d=%s", EnvPrefix, i, dev.Name)},
			Mounts: []mount{{HostPath: file, ContainerPath: ContainerDevicesDir + "/" + dev.Name, Options: []string{"ro", "bind"}}},
		}})
	}
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(d.cfg.CDIDir, strings.ReplaceAll(d.cfg.cdiKind(), "/", "-")+".json"), b)
}

// PrepareResourceClaims hands the kubelet the CDI devices of each claim's
// devices on this node.
func (d *Driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	logger := klog.FromContext(ctx)
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, claim := range claims {
		if claim.Status.Allocation == nil {
			out[claim.UID] = kubeletplugin.PrepareResult{Err: fmt.Errorf("claim %s/%s is not allocated", claim.Namespace, claim.Name)}
			continue
		}
		var res kubeletplugin.PrepareResult
		pc := PreparedClaim{Namespace: claim.Namespace, Name: claim.Name}
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.Driver != d.cfg.Driver {
				continue
			}
			if r.Pool != d.cfg.Node {
				res.Err = fmt.Errorf("claim %s/%s: device %s/%s is not on node %s", claim.Namespace, claim.Name, r.Pool, r.Device, d.cfg.Node)
				break
			}
			res.Devices = append(res.Devices, kubeletplugin.Device{
				Requests: []string{r.Request}, PoolName: r.Pool, DeviceName: r.Device,
				CDIDeviceIDs: []string{d.cfg.cdiKind() + "=" + r.Device},
			})
			pc.Devices = append(pc.Devices, r.Device)
		}
		if res.Err == nil {
			d.prepared[claim.UID] = pc
			logger.Info("Prepared claim", "claim", klog.KObj(claim), "devices", pc.Devices)
		}
		out[claim.UID] = res
	}
	return out, d.save()
}

// UnprepareResourceClaims forgets the claims; unpreparing one that is not
// prepared is not an error (the kubelet may ask again after a restart).
func (d *Driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	logger := klog.FromContext(ctx)
	out := make(map[types.UID]error, len(claims))
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, claim := range claims {
		if pc, ok := d.prepared[claim.UID]; ok {
			logger.Info("Unprepared claim", "claim", claim.NamespacedName, "devices", pc.Devices)
			delete(d.prepared, claim.UID)
		}
		out[claim.UID] = nil
	}
	return out, d.save()
}

// HandleError logs background errors; the ResourceSlice controller retries.
func (d *Driver) HandleError(ctx context.Context, err error, msg string) {
	runtime.HandleErrorWithContext(ctx, err, msg)
}

// WatchHealthStatus reports every device's health now, whenever the
// unhealthy list changes, and at least every 10 s.
func (d *Driver) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	var last []string
	var sent time.Time
	t := time.NewTicker(d.cfg.HealthEvery)
	defer t.Stop()
	for {
		unhealthy := d.unhealthy()
		if sent.IsZero() || !slices.Equal(unhealthy, last) || time.Since(sent) > 10*time.Second {
			report := kubeletplugin.DeviceHealthReport{}
			now := time.Now()
			for i := range d.cfg.Devices {
				name := DeviceName(i)
				h := kubeletplugin.DeviceHealth{PoolName: d.cfg.Node, DeviceName: name, Health: kubeletplugin.HealthStatusHealthy, LastUpdated: now}
				if slices.Contains(unhealthy, name) {
					h.Health, h.Message = kubeletplugin.HealthStatusUnhealthy, "listed in "+filepath.Join(d.cfg.StateDir, UnhealthyFile)
				}
				report.Devices = append(report.Devices, h)
			}
			select {
			case <-ctx.Done():
				return nil
			case reports <- report:
			}
			if !slices.Equal(unhealthy, last) {
				klog.FromContext(ctx).Info("Device health reported", "unhealthy", unhealthy)
			}
			last, sent = unhealthy, now
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// unhealthy reads the unhealthy list: device names, one per line, sorted.
func (d *Driver) unhealthy() []string {
	b, err := os.ReadFile(filepath.Join(d.cfg.StateDir, UnhealthyFile))
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Prepared reads the record of prepared claims in a driver's state
// directory: claim UID → namespace, name and devices.
func Prepared(stateDir string) (map[types.UID]PreparedClaim, error) {
	out := map[types.UID]PreparedClaim{}
	b, err := os.ReadFile(filepath.Join(stateDir, PreparedFile))
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	return out, json.Unmarshal(b, &out)
}

func (d *Driver) load() error {
	p, err := Prepared(d.cfg.StateDir)
	if err != nil {
		return fmt.Errorf("reading what was prepared: %w", err)
	}
	d.prepared = p
	return nil
}

func (d *Driver) save() error {
	b, err := json.MarshalIndent(d.prepared, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(d.cfg.StateDir, PreparedFile), b)
}

func writeFileAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
