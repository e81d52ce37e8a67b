package devcluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// Ports are the loopback ports of one cluster. They are fixed offsets from a
// base port so that `dev up` can say which one is taken before it starts.
type Ports struct {
	APIServer         int `json:"apiserver"`
	EtcdClient        int `json:"etcdClient"`
	EtcdPeer          int `json:"etcdPeer"`
	ControllerManager int `json:"controllerManager"`
	Simulator         int `json:"simulator"`
	KubeScheduler     int `json:"kubeScheduler"`
	Webhook           int `json:"webhook"`
	SchedulerMetrics  int `json:"schedulerMetrics"`
	ControllerMetrics int `json:"controllerMetrics"`
	WebhookHealth     int `json:"webhookHealth"`
	ControllerHealth  int `json:"controllerHealth"`
	SchedulerHealth   int `json:"schedulerHealth"`
	WebhookMetrics    int `json:"webhookMetrics"`
}

// PortCount is how many ports from the base port a cluster uses.
const PortCount = 13

// PortsFrom lays the ports out from base.
func PortsFrom(base int) Ports {
	return Ports{
		APIServer:         base,
		EtcdClient:        base + 1,
		EtcdPeer:          base + 2,
		ControllerManager: base + 3,
		Simulator:         base + 4,
		KubeScheduler:     base + 5,
		Webhook:           base + 6,
		SchedulerMetrics:  base + 7,
		ControllerMetrics: base + 8,
		WebhookHealth:     base + 9,
		ControllerHealth:  base + 10,
		SchedulerHealth:   base + 11,
		WebhookMetrics:    base + 12,
	}
}

func (p Ports) byComponent() []struct {
	name string
	port int
} {
	return []struct {
		name string
		port int
	}{
		{"kube-apiserver", p.APIServer},
		{"etcd (client)", p.EtcdClient},
		{"etcd (peer)", p.EtcdPeer},
		{"kube-controller-manager", p.ControllerManager},
		{"kwok (node simulator)", p.Simulator},
		{"kube-scheduler", p.KubeScheduler},
		{"lockstep webhook", p.Webhook},
		{"lockstep scheduler metrics", p.SchedulerMetrics},
		{"lockstep controllers metrics", p.ControllerMetrics},
		{"lockstep webhook health", p.WebhookHealth},
		{"lockstep controllers health", p.ControllerHealth},
		{"lockstep scheduler health", p.SchedulerHealth},
		{"lockstep webhook metrics", p.WebhookMetrics},
	}
}

// layout names every file of a cluster's state directory.
type layout struct{ dir string }

func (l layout) path(elem ...string) string {
	return filepath.Join(append([]string{l.dir}, elem...)...)
}

// expand replaces "{state}" in args with the state directory.
func (l layout) expand(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = strings.ReplaceAll(a, "{state}", l.path())
	}
	return out
}

func (l layout) pki() string             { return l.path("pki") }
func (l layout) logs() string            { return l.path("logs") }
func (l layout) log(name string) string  { return l.path("logs", name+".log") }
func (l layout) adminKubeconfig() string { return l.path("kubeconfig") }
func (l layout) kubeconfig(user string) string {
	return l.path("kubeconfigs", user+".kubeconfig")
}

func url(port int) string { return "http://127.0.0.1:" + strconv.Itoa(port) }

func etcdProcess(l layout, bin string, p Ports) *process {
	return &process{
		Name:   "etcd",
		Binary: filepath.Join(bin, "etcd"),
		Log:    l.log("etcd"),
		Args: []string{
			"--name=lockstep-dev",
			"--data-dir=" + l.path("etcd"),
			"--listen-client-urls=" + url(p.EtcdClient),
			"--advertise-client-urls=" + url(p.EtcdClient),
			"--listen-peer-urls=" + url(p.EtcdPeer),
			"--initial-advertise-peer-urls=" + url(p.EtcdPeer),
			"--initial-cluster=lockstep-dev=" + url(p.EtcdPeer),
			// A dev cluster trades durability for speed: losing it on a
			// power cut is fine, an fsync per write on a shared disk is not.
			"--unsafe-no-fsync=true",
			"--log-level=warn",
		},
	}
}

func apiserverProcess(l layout, bin string, p Ports, prof Profile) *process {
	pk := l.pki()
	args := []string{
		"--etcd-servers=" + url(p.EtcdClient),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(p.APIServer),
		"--tls-cert-file=" + filepath.Join(pk, "apiserver.crt"),
		"--tls-private-key-file=" + filepath.Join(pk, "apiserver.key"),
		"--client-ca-file=" + filepath.Join(pk, "ca.crt"),
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + filepath.Join(pk, "sa.pub"),
		"--service-account-signing-key-file=" + filepath.Join(pk, "sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24",
		// The endpoint of a loopback-only API server cannot be published as
		// the kubernetes Service (loopback endpoints are invalid).
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
		"--profiling=false",
	}
	if g := prof.FeatureGates(); g != "" {
		args = append(args, "--feature-gates="+g)
	}
	if rc := prof.RuntimeConfig(); rc != "" {
		args = append(args, "--runtime-config="+rc)
	}
	return &process{Name: "kube-apiserver", Binary: filepath.Join(bin, "kube-apiserver"), Log: l.log("kube-apiserver"), Args: args}
}

func controllerManagerProcess(l layout, bin string, p Ports, prof Profile) *process {
	pk := l.pki()
	kc := l.kubeconfig("kube-controller-manager")
	args := []string{
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(p.ControllerManager),
		"--service-account-private-key-file=" + filepath.Join(pk, "sa.key"),
		"--root-ca-file=" + filepath.Join(pk, "ca.crt"),
		"--use-service-account-credentials=true",
		// Every default-on controller: job, resourceclaim, garbage-collector,
		// namespace, podgc, device-taint-eviction, node-lifecycle, serviceaccount …
		"--controllers=*",
		"--leader-elect=false",
		// The default 20 QPS dominates every timing in tests and demos.
		"--kube-api-qps=500",
		"--kube-api-burst=1000",
		"--profiling=false",
	}
	if g := prof.FeatureGates(); g != "" {
		args = append(args, "--feature-gates="+g)
	}
	return &process{Name: "kube-controller-manager", Binary: filepath.Join(bin, "kube-controller-manager"), Log: l.log("kube-controller-manager"), Args: args}
}

func simulatorProcess(l layout, bin string, p Ports) *process {
	return &process{
		Name:   "kwok",
		Binary: filepath.Join(bin, "kwok"),
		Log:    l.log("kwok"),
		Args: []string{
			"--kubeconfig=" + l.kubeconfig("kwok"),
			"--config=" + l.path("kwok-stages.yaml"),
			"--manage-all-nodes=true",
			"--node-lease-duration-seconds=40",
			"--server-address=127.0.0.1:" + strconv.Itoa(p.Simulator),
			"--cidr=10.244.0.0/16",
			"--node-ip=10.96.0.1",
		},
	}
}

// simulateOnlyFakeNodes makes kwok leave real nodes to their kubelets: it
// manages the nodes carrying kwok's fake-node annotation, which every
// simulated node has (clusterspec, Karpenter's kwok provider).
func simulateOnlyFakeNodes(args []string) []string {
	out := make([]string, 0, len(args))
	for _, a := range args {
		if a != "--manage-all-nodes=true" {
			out = append(out, a)
		}
	}
	return append(out, "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake")
}

// describe is a one-line summary of a process for messages.
func (p *process) describe() string { return fmt.Sprintf("%s (pid %d, log %s)", p.Name, p.PID, p.Log) }

// Scheduler names a scheduler the cluster can run.
type Scheduler string

const (
	// SchedulerLockstep is `lockstep scheduler` (schedulerName lockstep).
	SchedulerLockstep Scheduler = "lockstep"
	// SchedulerKube is upstream kube-scheduler v1.37 (schedulerName
	// default-scheduler), the reference the demo compares against.
	SchedulerKube Scheduler = "kube-scheduler"
)

func kubeSchedulerProcess(l layout, bin string, p Ports, prof Profile) *process {
	kc := l.kubeconfig("kube-scheduler")
	args := []string{
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(p.KubeScheduler),
		"--leader-elect=false",
		"--kube-api-qps=200",
		"--kube-api-burst=400",
		"--profiling=false",
	}
	if g := prof.FeatureGates(); g != "" {
		args = append(args, "--feature-gates="+g)
	}
	return &process{Name: "kube-scheduler", Binary: filepath.Join(bin, "kube-scheduler"), Log: l.log("kube-scheduler"), Args: args}
}

// KubeSchedulerArgs are the arguments of a kube-scheduler that a test or
// benchmark starts itself on this cluster (bin/kube-scheduler): the
// cluster's own flags and profile gates, serving nothing, with extra
// appended (a later flag wins).
func (c *Cluster) KubeSchedulerArgs(extra ...string) []string {
	p := kubeSchedulerProcess(c.layout, "", Ports{}, c.state.Profile)
	return append(p.Args, extra...)
}

// LockstepSchedulerArgs are the arguments of a `lockstep scheduler` replica
// in this cluster; tests start extra replicas with them (metrics off, so
// replicas do not compete for the port).
func (c *Cluster) LockstepSchedulerArgs(identity string) []string {
	return []string{
		"scheduler",
		"--kubeconfig=" + c.layout.kubeconfig("lockstep-scheduler"),
		"--identity=" + identity,
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
		"-v=2",
	}
}

// LockstepControllersArgs are the arguments of a `lockstep controllers`
// replica in this cluster; tests start their own with them (metrics and
// health off, so replicas do not compete for ports).
func (c *Cluster) LockstepControllersArgs() []string {
	return []string{
		"controllers",
		"--kubeconfig=" + c.layout.kubeconfig("lockstep-controllers"),
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
		"-v=2",
	}
}

// Ready reports whether a Lockstep component ("lockstep-scheduler",
// "lockstep-controllers" or "lockstep-webhook") answers its /readyz.
func (c *Cluster) Ready(ctx context.Context, component string) error {
	port, ok := map[string]int{
		"lockstep-scheduler":   c.state.Ports.SchedulerHealth,
		"lockstep-controllers": c.state.Ports.ControllerHealth,
		"lockstep-webhook":     c.state.Ports.WebhookHealth,
	}[component]
	if !ok {
		return fmt.Errorf("%s has no health port", component)
	}
	return componentReady(ctx, port)
}

// SchedulerMetricsURL is where the cluster's Lockstep scheduler serves /metrics.
func (c *Cluster) SchedulerMetricsURL() string {
	return "http://127.0.0.1:" + strconv.Itoa(c.state.Ports.SchedulerMetrics) + "/metrics"
}

// WebhookMetricsURL is where the cluster's Lockstep webhook serves /metrics.
func (c *Cluster) WebhookMetricsURL() string {
	return "http://127.0.0.1:" + strconv.Itoa(c.state.Ports.WebhookMetrics) + "/metrics"
}

// lockstepProcesses are Lockstep's own components: scheduler, controllers
// and admission webhook, each with its own identity and RBAC.
func (c *Cluster) lockstepProcesses(bin string, schedulerArgs []string) []*process {
	l, p := c.layout, c.state.Ports
	lockstep := filepath.Join(bin, "lockstep")
	return []*process{
		{Name: "lockstep-webhook", Binary: lockstep, Log: l.log("lockstep-webhook"), Args: []string{
			"webhook", "--kubeconfig=" + l.kubeconfig("lockstep-webhook"), "--bind-address=127.0.0.1",
			"--port=" + strconv.Itoa(p.Webhook), "--url-host=127.0.0.1:" + strconv.Itoa(p.Webhook),
			"--cert-dir=" + l.path("webhook-certs"), "-v=2",
			"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(p.WebhookHealth),
			"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(p.WebhookMetrics),
		}},
		{Name: "lockstep-controllers", Binary: lockstep, Log: l.log("lockstep-controllers"), Args: append(c.LockstepControllersArgs(),
			"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(p.ControllerMetrics),
			"--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(p.ControllerHealth))},
		{Name: "lockstep-scheduler", Binary: lockstep, Log: l.log("lockstep-scheduler"), Args: append(append(c.LockstepSchedulerArgs("lockstep-scheduler-0"),
			"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(p.SchedulerMetrics),
			"--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(p.SchedulerHealth)), l.expand(schedulerArgs)...)},
	}
}
