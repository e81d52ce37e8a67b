package devcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/lockstep-dev/lockstep/internal/devcluster/gpudriver"
)

// Real nodes (Options.RealNodes) run pods as real containers beside the
// simulated nodes: each is a kubelet v1.37 (bin/kubelet), its own containerd
// (bin/containerd with its runc shim; runc from the host), the pause and
// rank images imported from bin/images, and the simulated-GPU DRA driver
// (`lockstep dev gpu-driver`) as its kubelet plugin. Everything a node has
// lives in its own directory, cgroup and network bridge:
//
//   - /tmp/lockstep-<port>-<name>/ (linked from <state>/nodes/<name>: unix
//     socket paths, the kubelet's plugin sockets among them, must stay under
//     108 bytes wherever the state directory is): containerd's root and
//     state, the kubelet's root, pod logs, CNI and CDI configuration, the
//     driver's state, runc's state;
//   - the cgroup lockstep-<port>-<name> in every hierarchy: runtime/ holds
//     containerd, its shims, the kubelet and the driver; pods/ is the
//     kubelet's cgroupRoot;
//   - the bridge ls<port>r<index> whose address is the node's InternalIP
//     (the kubelet serves there, the API server reaches it there) and whose
//     /24 the bridge CNI plugin hands its pods.
//
// Stopping the cluster stops the processes, then kills whatever is left in
// the node's cgroups (containers, shims), unmounts everything under its
// directory, removes its cgroups, bridge and log links, so that nothing of a
// real node outlives `dev down` or a failed `dev up`.

// RealNodeLabel marks the real nodes; simulated nodes do not carry it. Real
// nodes are also tainted with it (NoSchedule), so that only pods meant for
// real containers — tolerating it — land there: a cluster's simulated
// workloads (image "sim", nothing to pull) stay where they were.
const RealNodeLabel = "dev.lockstep.dev/real-node"

// RealNodeToleration lets a pod onto the real nodes.
var RealNodeToleration = corev1.Toleration{Key: RealNodeLabel, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}

// Images the real nodes import (hack/images, built by make build).
const (
	PauseImage = "lockstep.local/pause:latest"
	RankImage  = "lockstep.local/rank:latest"
)

// realNode is one real node as state.json records it, for Down.
type realNode struct {
	Name string `json:"name"`
	// Dir is the node's directory.
	Dir string `json:"dir"`
	// Cgroup is the node's cgroup, relative to every hierarchy's root.
	Cgroup string `json:"cgroup"`
	// Bridge is its network bridge; IP its address, the node's InternalIP.
	Bridge string `json:"bridge"`
	IP     string `json:"ip"`
	Subnet string `json:"subnet"`
}

func (n *realNode) path(elem ...string) string {
	return filepath.Join(append([]string{n.Dir}, elem...)...)
}

// DriverStateDir is where the simulated-GPU driver of a real node keeps the
// unhealthy list and the record of what it prepared (gpudriver).
func (c *Cluster) DriverStateDir(node string) string {
	return filepath.Join(c.RealNodeDir(node), "driver")
}

// RealNodeDir is the directory of a real node ("" for another name).
func (c *Cluster) RealNodeDir(node string) string {
	for _, n := range c.state.RealNodes {
		if n.Name == node {
			return n.Dir
		}
	}
	return ""
}

// RealNodes names the cluster's real nodes.
func (c *Cluster) RealNodes() []string {
	var out []string
	for _, n := range c.state.RealNodes {
		out = append(out, n.Name)
	}
	return out
}

// RealNodeName is the name of the i-th real node.
func RealNodeName(i int) string { return fmt.Sprintf("real-%d", i) }

// realNodeBinaries are what a real node runs, from the bin directory.
var realNodeBinaries = []string{"kubelet", "containerd", "containerd-shim-runc-v2", "ctr", "images/pause.tar", "images/rank.tar"}

// CanRunRealNodes says what this machine lacks to run real nodes from the
// binaries in bin (nil: nothing).
func CanRunRealNodes(bin string) error {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (a kubelet and containerd manage cgroups, mounts and network namespaces)")
	}
	for _, b := range realNodeBinaries {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			missing = append(missing, filepath.Join(bin, b)+" (run `make build`)")
		}
	}
	if _, err := exec.LookPath("runc"); err != nil {
		missing = append(missing, "runc (apt-get install runc)")
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, p)); err != nil {
			missing = append(missing, filepath.Join(cniBinDir, p)+" (apt-get install containernetworking-plugins)")
		}
	}
	if _, err := exec.LookPath("ip"); err != nil {
		missing = append(missing, "ip (apt-get install iproute2)")
	}
	if len(missing) > 0 {
		return fmt.Errorf("real nodes need %s", strings.Join(missing, ", "))
	}
	return nil
}

// cniBinDir is where Debian's containernetworking-plugins puts the plugins.
const cniBinDir = "/usr/lib/cni"

// planRealNodes names each real node's directory, cgroup, bridge and subnet:
// the first /24s of 10.88.0.0/16 that no interface of this machine uses.
func planRealNodes(l layout, n, port int) ([]*realNode, error) {
	used, err := usedSubnets()
	if err != nil {
		return nil, err
	}
	var out []*realNode
	next := 0
	for i := range n {
		for next < 256 && used[next] {
			next++
		}
		if next == 256 {
			return nil, errors.New("no free /24 in 10.88.0.0/16 for a real node's pods")
		}
		name := RealNodeName(i)
		out = append(out, &realNode{
			Name:   name,
			Dir:    filepath.Join(os.TempDir(), fmt.Sprintf("lockstep-%d-%s", port, name)),
			Cgroup: fmt.Sprintf("lockstep-%d-%s", port, name),
			Bridge: fmt.Sprintf("ls%dr%d", port, i),
			IP:     fmt.Sprintf("10.88.%d.1", next),
			Subnet: fmt.Sprintf("10.88.%d.0/24", next),
		})
		next++
	}
	return out, nil
}

// usedSubnets are the third octets of the 10.88.x.0/24 networks this
// machine's interfaces already have addresses in.
func usedSubnets() (map[int]bool, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	used := map[int]bool{}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		if ip4 := ipn.IP.To4(); ip4 != nil && ip4[0] == 10 && ip4[1] == 88 {
			used[int(ip4[2])] = true
		}
	}
	return used, nil
}

// nodeIdentity is the client certificate identity of a real node's kubelet
// (and its driver): what the Node authorizer confines to that node.
func nodeIdentity(name string) identity {
	return identity{file: "node-" + name, cn: "system:node:" + name, groups: []string{"system:nodes"}}
}

// kubeletClientIdentity is how the API server authenticates to kubelets
// (logs, exec, port-forward).
var kubeletClientIdentity = identity{file: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client", groups: []string{"system:masters"}}

// realNodeAPIServerArgs let the API server reach the real kubelets at their
// InternalIP with its own client certificate.
func realNodeAPIServerArgs(l layout) []string {
	pk := l.pki()
	return []string{
		"--kubelet-client-certificate=" + filepath.Join(pk, kubeletClientIdentity.file+".crt"),
		"--kubelet-client-key=" + filepath.Join(pk, kubeletClientIdentity.file+".key"),
		"--kubelet-preferred-address-types=InternalIP",
	}
}

// prepare creates the node's directories, cgroups, bridge and the
// configuration of its containerd, CNI and kubelet.
func (n *realNode) prepare(l layout) error {
	// Left by a crash that lost state.json: nothing of it may still run.
	if err := unmountUnder(n.Dir); err != nil {
		return err
	}
	if err := os.RemoveAll(n.Dir); err != nil {
		return err
	}
	if err := os.MkdirAll(l.path("nodes"), 0o755); err != nil {
		return err
	}
	if err := os.Symlink(n.Dir, l.path("nodes", n.Name)); err != nil {
		return err
	}
	for _, d := range []string{"containerd/root", "containerd/state", "kubelet", "kubelet-pki", "pod-logs", "cni/net.d", "cni/data", "cdi", "driver", "runc"} {
		if err := os.MkdirAll(n.path(d), 0o755); err != nil {
			return err
		}
	}
	if err := makeCgroups(n.Cgroup); err != nil {
		return fmt.Errorf("creating the cgroups of %s: %w", n.Name, err)
	}
	if err := n.makeBridge(); err != nil {
		return fmt.Errorf("creating the bridge of %s: %w", n.Name, err)
	}
	files := map[string]string{
		"containerd/config.toml":         n.containerdConfig(),
		"cni/net.d/10-lockstep.conflist": n.cniConfig(),
		"kubelet-config.yaml":            n.kubeletConfig(l),
	}
	for name, content := range files {
		if err := os.WriteFile(n.path(name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (n *realNode) containerdConfig() string {
	return fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[plugins."io.containerd.cri.v1.images".pinned_images]
  sandbox = %[5]q
[plugins."io.containerd.cri.v1.runtime"]
  cdi_spec_dirs = [%[6]q]
  # Network namespaces under the state directory, so that stopping the node unmounts them.
  netns_mounts_under_state_dir = true
  # This machine may refuse lowering a process's oom_score_adj (no CAP_SYS_RESOURCE in a
  # sandboxed VM); containers get no lower score than containerd's own.
  restrict_oom_score_adj = true
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [%[7]q]
    conf_dir = %[8]q
  [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
      Root = %[9]q
`, n.path("containerd", "root"), n.path("containerd", "state"), n.socket(), n.socket()+".ttrpc",
		PauseImage, n.path("cdi"), cniBinDir, n.path("cni", "net.d"), n.path("runc"))
}

func (n *realNode) socket() string { return n.path("containerd.sock") }

// cniConfig is a bridge network on the node's own bridge and /24; pods
// reach each other and the host, nothing is masqueraded.
func (n *realNode) cniConfig() string {
	return fmt.Sprintf(`{"cniVersion": "1.0.0", "name": %q, "plugins": [
  {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": %q, "gateway": %q}]], "dataDir": %q}},
  {"type": "loopback"}
]}
`, "lockstep-"+n.Name, n.Bridge, n.Subnet, n.IP, n.path("cni", "data"))
}

func (n *realNode) kubeletConfig(l layout) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: 10250
readOnlyPort: 0
healthzBindAddress: %[1]s
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[2]q}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://%[3]s
podLogsDir: %[4]q
# cgroup v1 hosts are still supported when asked (the default refuses them since 1.35).
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /%[5]s/pods
cgroupsPerQOS: true
enforceNodeAllocatable: []
failSwapOn: false
localStorageCapacityIsolation: false
evictionHard: {}
imageGCHighThresholdPercent: 100
serializeImagePulls: false
resolvConf: ""
maxPods: 30
staticPodPath: ""
`, n.IP, filepath.Join(l.pki(), "ca.crt"), n.socket(), n.path("pod-logs"), n.Cgroup)
}

// makeBridge creates the node's bridge with the node's address, so the
// kubelet can serve there before the first pod (the CNI plugin then reuses it).
func (n *realNode) makeBridge() error {
	_ = exec.Command("ip", "link", "delete", n.Bridge).Run() // left by a crash
	for _, args := range [][]string{
		{"link", "add", "name", n.Bridge, "type", "bridge"},
		{"addr", "add", strings.TrimSuffix(n.Subnet, "0/24") + "1/24", "dev", n.Bridge},
		{"link", "set", n.Bridge, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// processes are the node's components, in start order.
func (n *realNode) processes(l layout, bin string, prof Profile, gpus int) (containerd, kubelet, driver *process) {
	env := []string{"PATH=" + bin + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	cg := n.Cgroup + "/runtime"
	containerd = &process{Name: n.Name + "-containerd", Binary: filepath.Join(bin, "containerd"), Log: l.log(n.Name + "-containerd"),
		Args: []string{"--config=" + n.path("containerd", "config.toml")}, Env: env, Cgroup: cg}
	kc := l.kubeconfig(nodeIdentity(n.Name).file)
	args := []string{
		"--config=" + n.path("kubelet-config.yaml"),
		"--kubeconfig=" + kc,
		"--root-dir=" + n.path("kubelet"),
		"--cert-dir=" + n.path("kubelet-pki"),
		"--hostname-override=" + n.Name,
		"--node-ip=" + n.IP,
		"--node-labels=" + RealNodeLabel + "=true,node.kubernetes.io/instance-type=real.gpu-" + strconv.Itoa(gpus) + "x",
		"--register-with-taints=" + RealNodeLabel + "=true:NoSchedule",
		"-v=2",
	}
	if g := prof.FeatureGates(); g != "" {
		args = append(args, "--feature-gates="+g)
	}
	kubelet = &process{Name: n.Name + "-kubelet", Binary: filepath.Join(bin, "kubelet"), Log: l.log(n.Name + "-kubelet"), Args: args, Env: env, Cgroup: cg}
	driver = &process{Name: n.Name + "-gpu-driver", Binary: filepath.Join(bin, "lockstep"), Log: l.log(n.Name + "-gpu-driver"), Cgroup: cg, Args: []string{
		"dev", "gpu-driver", "--kubeconfig=" + kc, "--node=" + n.Name, "--devices=" + strconv.Itoa(gpus),
		"--kubelet-dir=" + n.path("kubelet"), "--cdi-dir=" + n.path("cdi"), "--state-dir=" + n.path("driver"), "-v=2",
	}}
	return containerd, kubelet, driver
}

// startRealNodes starts every real node and waits until each is Ready and
// has published its devices.
func (c *Cluster) startRealNodes(ctx context.Context, opts Options, client kubernetes.Interface) error {
	for _, n := range c.state.RealNodes {
		if err := n.prepare(c.layout); err != nil {
			return err
		}
		containerd, kubelet, driver := n.processes(c.layout, opts.BinDir, opts.Profile, opts.RealNodeGPUs)
		if err := c.launch(containerd, opts.Tied); err != nil {
			return err
		}
		if err := c.waitFor(ctx, containerd, n.Name+"'s containerd serving", func(context.Context) error {
			conn, err := net.DialTimeout("unix", n.socket(), time.Second)
			if err != nil {
				return err
			}
			return conn.Close()
		}); err != nil {
			return err
		}
		for _, img := range []string{"pause", "rank"} {
			out, err := exec.CommandContext(ctx, filepath.Join(opts.BinDir, "ctr"), "--address", n.socket(), "--namespace", "k8s.io",
				"images", "import", filepath.Join(opts.BinDir, "images", img+".tar")).CombinedOutput()
			if err != nil {
				return fmt.Errorf("importing the %s image into %s: %w: %s", img, n.Name, err, strings.TrimSpace(string(out)))
			}
		}
		if err := c.launch(kubelet, opts.Tied); err != nil {
			return err
		}
		if err := c.waitFor(ctx, kubelet, n.Name+" registered", func(ctx context.Context) error {
			_, err := client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			return err
		}); err != nil {
			return err
		}
		if err := c.launch(driver, opts.Tied); err != nil {
			return err
		}
	}
	for _, n := range c.state.RealNodes {
		if err := c.waitFor(ctx, c.process(n.Name+"-kubelet"), n.Name+" Ready with its GPUs published", func(ctx context.Context) error {
			return realNodeReady(ctx, client, n.Name)
		}); err != nil {
			return err
		}
	}
	return nil
}

// realNodeReady is nil once the node is Ready and its driver's
// ResourceSlice exists.
func realNodeReady(ctx context.Context, client kubernetes.Interface, name string) error {
	node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	ready := false
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
			if !ready {
				return fmt.Errorf("node %s not Ready: %s", name, c.Message)
			}
		}
	}
	if !ready {
		return fmt.Errorf("node %s has no Ready condition yet", name)
	}
	slices, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: resourcev1.ResourceSliceSelectorNodeName + "=" + name})
	if err != nil {
		return err
	}
	for _, s := range slices.Items {
		if s.Spec.Driver == gpudriver.DefaultDriver && len(s.Spec.Devices) > 0 {
			return nil
		}
	}
	return fmt.Errorf("node %s: no ResourceSlice of %s yet", name, gpudriver.DefaultDriver)
}

// teardown removes whatever of the node is left once its processes are
// stopped: processes in its cgroups (containers, shims), mounts under its
// directory, its cgroups, bridge and container log links.
func (n *realNode) teardown() error {
	var errs []error
	if err := killCgroup(n.Cgroup); err != nil {
		errs = append(errs, err)
	}
	if err := unmountUnder(n.Dir); err != nil {
		errs = append(errs, err)
	}
	if err := removeCgroups(n.Cgroup); err != nil {
		errs = append(errs, err)
	}
	if out, err := exec.Command("ip", "link", "delete", n.Bridge).CombinedOutput(); err != nil && !strings.Contains(string(out), "Cannot find device") {
		errs = append(errs, fmt.Errorf("deleting bridge %s: %w: %s", n.Bridge, err, strings.TrimSpace(string(out))))
	}
	removeLogLinks(n.Dir)
	if err := os.RemoveAll(n.Dir); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("tearing down real node %s: %w", n.Name, errors.Join(errs...))
	}
	return nil
}

// removeLogLinks removes the links the kubelet made in /var/log/containers
// to the node's pod logs.
func removeLogLinks(dir string) {
	const links = "/var/log/containers"
	entries, err := os.ReadDir(links)
	if err != nil {
		return
	}
	for _, e := range entries {
		p := filepath.Join(links, e.Name())
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
			_ = os.Remove(p)
		}
	}
}
