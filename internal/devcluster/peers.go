package devcluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-dev/lockstep/internal/certs"
	"github.com/lockstep-dev/lockstep/internal/kueuecheck"
)

// Controller is another project's controller run beside Lockstep (by the
// e2e tests and the demo), as its users run it: its own binary, built from the Go module
// proxy into bin/<Name>-controller by hack/build-tools.sh (module
// hack/integrations/<Name> pins the version), its CRDs and its admission
// webhooks from the same module version, registered with the API server.
type Controller struct {
	Name string
	// Module is the Go module the controller, its CRDs and its webhook
	// manifests come from.
	Module string
	// CRDs are the module's CRD manifests (files or directories).
	CRDs []string
	// Webhooks is the module's webhook configuration manifest; only the
	// webhooks of KeepWebhooks' resources are registered (the others serve
	// kinds the tests do not use, or every pod of the cluster).
	Webhooks     string
	KeepWebhooks []string
	// ObjectSelectors and NamespaceSelectors narrow webhooks by name, as
	// the project's own kustomize patches (its pod webhook only for its own
	// pods) or a cluster's administrator (only in the namespaces that use
	// it) do.
	ObjectSelectors, NamespaceSelectors map[string]*metav1.LabelSelector
	// Config renders the controller's configuration file.
	Config func(p ControllerPorts) string
	// Namespace the controller expects to exist.
	Namespace string
	// FixedCertDirs are directories the controller reads a serving
	// certificate from that its configuration cannot move (Kueue's metrics
	// certificate path is fixed at /etc/kueue/metrics/certs when it does
	// not manage certificates itself); the harness writes its pair there too.
	FixedCertDirs []string
	// TempDirCerts: the controller reads its serving certificate from
	// controller-runtime's default directory under the temporary
	// directory, which no option moves; the harness gives it a temporary
	// directory of its own (TMPDIR), so that two controllers of the kind
	// (two test packages' clusters at once) do not share one, and writes
	// its pair there.
	TempDirCerts bool
	Args         []string
	// Flags are the command line of a controller configured by flags
	// alone (no Config): where it serves, given its ports.
	Flags func(p ControllerPorts) []string
	// Files are written into the controller's directory before it starts
	// (name → content; ControllerPorts.File is a file's path).
	Files map[string]string
	// Secrets are empty Secrets the controller expects in its namespace
	// (a certificate rotator's, which it fills itself).
	Secrets []string
	// NoWebhookServer: the controller serves no admission webhooks (the
	// harness waits for its health endpoint alone).
	NoWebhookServer bool
	// ReadyPath is its readiness endpoint on the health port; "" is
	// /readyz.
	ReadyPath string
	// HealthPort is a health port the controller cannot be told to move
	// (0: the harness picks one). Its process holds a machine-wide lock of
	// the port (lockPort): another local cluster's waits for it.
	HealthPort int
	// Env is added to the controller's environment.
	Env []string
	// Objects are created once the controller serves (and left if they
	// exist), e.g. Lockstep's Kueue AdmissionCheck.
	Objects []PeerObject
	// SchedulerArgs are flags Lockstep's scheduler runs with beside the
	// controller ("{state}" is the cluster's state directory);
	// SchedulerFiles are files written there for them (name → content).
	SchedulerArgs  []string
	SchedulerFiles map[string]string
}

// PeerSchedulerArgs are the flags Lockstep's scheduler runs with beside
// peers (each peer's SchedulerArgs): with Kueue, its placement check; with
// Karpenter, cooperation and the instance types it may ask for. "{state}"
// stands for the cluster's state directory, where PeerSchedulerFiles are.
func PeerSchedulerArgs(peers []Controller) []string {
	var out []string
	for _, p := range peers {
		out = append(out, p.SchedulerArgs...)
	}
	return out
}

// PeerSchedulerFiles are the files peers' SchedulerArgs name, by name in
// the state directory.
func PeerSchedulerFiles(peers []Controller) map[string]string {
	out := map[string]string{}
	for _, p := range peers {
		for name, content := range p.SchedulerFiles {
			out[name] = content
		}
	}
	return out
}

// PeerObject is an object of a peer's API created once it serves.
type PeerObject struct {
	Resource schema.GroupVersionResource
	Manifest string
}

// KueuePlacementCheck is the AdmissionCheck `dev up --integrations kueue`
// creates (and the chart, kueue.placementCheck): ClusterQueues that name
// it in spec.admissionChecks admit a workload only when Lockstep can place
// it whole.
const KueuePlacementCheck = "lockstep-placement"

// ControllerPorts are where a started controller serves.
type ControllerPorts struct {
	Webhook, Health int
	// Metrics is a free port for a controller that serves metrics on a
	// port it cannot be told to turn off.
	Metrics   int
	CertDir   string
	Namespace string
	// dir is the controller's own directory.
	dir string
	// webhookPaths are the paths of the webhooks registered for it.
	webhookPaths []string
}

// File is the path of one of the controller's Files.
func (p ControllerPorts) File(name string) string { return filepath.Join(p.dir, name) }

// JobSetController is sigs.k8s.io/jobset's controller manager.
var JobSetController = Controller{
	Name: "jobset", Module: "sigs.k8s.io/jobset", Namespace: "jobset-system",
	CRDs: []string{"config/components/crd/bases"}, Webhooks: "config/components/webhook/manifests.yaml", KeepWebhooks: []string{"jobsets"},
	Config: managerConfig("config.jobset.x-k8s.io/v1alpha1"),
}

// managerConfig is the configuration file of a kubebuilder controller
// manager of the given config API (JobSet's and LWS's share its shape):
// no leader election, certificates from the harness, webhook and health
// on loopback, no metrics.
func managerConfig(apiVersion string) func(ControllerPorts) string {
	return func(p ControllerPorts) string {
		return fmt.Sprintf(`apiVersion: %s
kind: Configuration
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
health:
  healthProbeBindAddress: 127.0.0.1:%d
metrics:
  bindAddress: "0"
`, apiVersion, p.Webhook, p.CertDir, p.Health)
	}
}

// LWSController is sigs.k8s.io/lws's controller manager; its pod webhook
// (which labels a group's pods with their group index) sees only its own
// pods, as its release manifests have it.
var LWSController = Controller{
	Name: "lws", Module: "sigs.k8s.io/lws", Namespace: "lws-system",
	CRDs: []string{"config/crd/bases"}, Webhooks: "config/webhook/manifests.yaml", KeepWebhooks: []string{"leaderworkersets", "pods"},
	ObjectSelectors: map[string]*metav1.LabelSelector{
		"mpod.kb.io": {MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "leaderworkerset.sigs.k8s.io/name", Operator: metav1.LabelSelectorOpExists}}},
		"vpod.kb.io": {MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "leaderworkerset.sigs.k8s.io/name", Operator: metav1.LabelSelectorOpExists}}},
	},
	Config: managerConfig("config.lws.x-k8s.io/v1alpha1"),
}

// KueuePodsNamespaceLabel marks the namespaces where Kueue's pod
// integration (plain pods and StatefulSets) is on: its pod webhooks see
// every pod creation, so a cluster's administrator narrows them to the
// namespaces that use them, as Kueue's documentation advises.
const KueuePodsNamespaceLabel = "kueue.x-k8s.io/pod-integration"

var kueuePodNamespaces = &metav1.LabelSelector{MatchLabels: map[string]string{KueuePodsNamespaceLabel: "true"}}

// KueueController is sigs.k8s.io/kueue's controller manager, with the
// batch/v1 Job, JobSet, TrainJob, pod and StatefulSet integrations (the last two in
// namespaces labelled KueuePodsNamespaceLabel) and without its visibility
// API server (an aggregated API the local control plane does not route).
var KueueController = Controller{
	Name: "kueue", Module: "sigs.k8s.io/kueue", Namespace: "kueue-system", FixedCertDirs: []string{"/etc/kueue/metrics/certs"},
	SchedulerArgs: []string{"--kueue-placement-check"},
	CRDs:          []string{"config/components/crd/bases"}, Webhooks: "config/components/webhook/manifests.yaml",
	KeepWebhooks: []string{"jobs", "jobsets", "trainjobs", "pods", "statefulsets", "workloads", "clusterqueues", "resourceflavors", "cohorts"},
	NamespaceSelectors: map[string]*metav1.LabelSelector{
		"mpod.kb.io": kueuePodNamespaces, "vpod.kb.io": kueuePodNamespaces, "mstatefulset.kb.io": kueuePodNamespaces, "vstatefulset.kb.io": kueuePodNamespaces,
	},
	Args: []string{"--feature-gates=VisibilityOnDemand=false"},
	Objects: []PeerObject{{Resource: schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "admissionchecks"},
		Manifest: "apiVersion: kueue.x-k8s.io/v1beta2\nkind: AdmissionCheck\nmetadata: {name: " + KueuePlacementCheck + "}\nspec: {controllerName: " + kueuecheck.ControllerName + "}\n"}},
	Config: func(p ControllerPorts) string {
		return fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: %s
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
health:
  healthProbeBindAddress: 127.0.0.1:%d
metrics:
  bindAddress: "0"
managedJobsNamespaceSelector:
  matchExpressions:
  - {key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system, kueue-system]}
integrations:
  frameworks:
  - batch/job
  - jobset.x-k8s.io/jobset
  - trainer.kubeflow.org/trainjob
  - pod
  - statefulset
`, p.Namespace, p.Webhook, p.CertDir, p.Health)
	},
}

// TrainingOperatorController is Kubeflow's training operator (v1) with its
// PyTorchJob controller only. Its webhooks are not registered (their
// configuration would need the operator's own certificate rotation to be
// injected); it validates nothing the tests rely on. Its rotator fills the
// Secret it expects, and it serves the pair the harness writes to the fixed
// directory it reads. The workers' init container (which waits for the
// master's DNS name) is configured away: the simulated nodes run no DNS.
var TrainingOperatorController = Controller{
	Name: "training", Module: "github.com/kubeflow/training-operator", Namespace: "kubeflow",
	CRDs: []string{"manifests/base/crds/kubeflow.org_pytorchjobs.yaml"}, FixedCertDirs: []string{"/tmp/k8s-webhook-server/serving-certs"},
	Secrets: []string{"training-operator-webhook-cert"},
	Files:   map[string]string{"init-containers.yaml": "[]\n"},
	Flags: func(p ControllerPorts) []string {
		return []string{"--enable-scheme=pytorchjob", "--leader-elect=false", "--metrics-bind-address=0",
			"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(p.Health), "--webhook-server-port=" + strconv.Itoa(p.Webhook),
			"--pytorch-init-container-template-file=" + p.File("init-containers.yaml")}
	},
}

// TrainerController is Kubeflow Trainer v2's controller manager (TrainJob,
// TrainingRuntime, ClusterTrainingRuntime), which runs a TrainJob as a
// JobSet: the JobSet controller and its CRD must be there first. Its
// webhooks are registered with the harness's certificate (its own
// rotation off); its runtime status server is off (a feature gate, off by
// default).
var TrainerController = Controller{
	Name: "trainer", Module: "github.com/kubeflow/trainer/v2", Namespace: "kubeflow-system",
	CRDs: []string{
		"manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml",
		"manifests/base/crds/trainer.kubeflow.org_trainingruntimes.yaml",
		"manifests/base/crds/trainer.kubeflow.org_clustertrainingruntimes.yaml",
	},
	Webhooks: "manifests/base/webhook/manifests.yaml", KeepWebhooks: []string{"trainjobs", "trainingruntimes", "clustertrainingruntimes"},
	TempDirCerts: true,
	Config: func(p ControllerPorts) string {
		return fmt.Sprintf(`apiVersion: config.trainer.kubeflow.org/v1alpha1
kind: Configuration
leaderElection:
  leaderElect: false
certManagement:
  enable: false
webhook:
  host: 127.0.0.1
  port: %d
health:
  healthProbeBindAddress: 127.0.0.1:%d
metrics:
  bindAddress: "0"
`, p.Webhook, p.Health)
	},
}

// MPIOperatorController is Kubeflow's MPI operator (MPIJob v2beta1). It
// has no webhooks; it always elects a leader (in its lock namespace) and
// serves its health check on :8080, which no flag moves.
var MPIOperatorController = Controller{
	Name: "mpi", Module: "github.com/kubeflow/mpi-operator", Namespace: "mpi-operator",
	CRDs: []string{"manifests/base/kubeflow.org_mpijobs.yaml"}, NoWebhookServer: true, HealthPort: 8080, ReadyPath: "/healthz",
	Flags: func(ControllerPorts) []string { return []string{"-lock-namespace=mpi-operator", "-monitoring-port=0"} },
}

// KubeRayController is the KubeRay operator (RayCluster, RayJob,
// RayService). It runs no webhooks by default; the workers' init container
// (which waits for the head's GCS over the network) is turned off: the
// simulated nodes run no containers.
var KubeRayController = Controller{
	Name: "ray", Module: "github.com/ray-project/kuberay/ray-operator", CRDs: []string{"config/crd/bases"}, NoWebhookServer: true,
	Env: []string{"ENABLE_INIT_CONTAINER_INJECTION=false"},
	Flags: func(p ControllerPorts) []string {
		return []string{"--enable-leader-election=false", "--metrics-addr=0", "--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(p.Health)}
	},
}

// StartController installs c's CRDs and webhooks (from the module the
// checkout root's hack/integrations/<name> pins) and runs root/bin/<name>-
// controller against the cluster as one of its components: recorded in
// state.json (so a supervisor starts it again if it exits, and Down stops
// it), tied to this process when the cluster is, its log beside the
// cluster's. It returns once the controller is ready and its webhooks
// answer; stop stops it.
func (c *Cluster) StartController(ctx context.Context, ctl Controller, root string) (stop func(), err error) {
	p, ports, err := c.prepareController(ctx, ctl, root)
	if err != nil {
		return nil, err
	}
	if ctl.HealthPort != 0 {
		f, waited, err := lockPort(ctx, ctl.HealthPort)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ctl.Name, err)
		}
		p.Locks, p.held = []string{f.Name()}, []*os.File{f}
		// The wait does not count against the time to start it.
		var cancel context.CancelFunc
		ctx, cancel = postpone(ctx, waited)
		defer cancel()
	}
	if err := c.launch(p, c.state.Tied); err != nil {
		return nil, err
	}
	stop = func() { _ = p.stop(15 * time.Second) }
	if err := waitServing(ctx, ctl, ports, p.exited, p.Log); err != nil {
		stop()
		return nil, err
	}
	if err := c.createPeerObjects(ctx, ctl); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// prepareController installs what c needs before it starts — CRDs, its
// namespace, serving certificates, webhook configurations, Secrets, files,
// its configuration — and returns the process to start.
func (c *Cluster) prepareController(ctx context.Context, ctl Controller, root string) (*process, ControllerPorts, error) {
	var p ControllerPorts
	bin := filepath.Join(root, "bin", ctl.Name+"-controller")
	if _, err := os.Stat(bin); err != nil {
		return nil, p, fmt.Errorf("%s: %w (make build builds it)", bin, err)
	}
	modDir, err := moduleDir(root, ctl)
	if err != nil {
		return nil, p, err
	}
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, p, err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, p, err
	}
	var crds []string
	for _, f := range ctl.CRDs {
		crds = append(crds, filepath.Join(modDir, f))
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, p, err
	}
	if err := InstallCRDs(ctx, dyn, crds...); err != nil {
		return nil, p, fmt.Errorf("%s's CRDs: %w", ctl.Name, err)
	}
	if ctl.Namespace != "" {
		_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ctl.Namespace}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, p, err
		}
	}
	dir := filepath.Join(c.Dir(), ctl.Name)
	p = ControllerPorts{CertDir: filepath.Join(dir, "certs"), Namespace: ctl.Namespace, dir: dir}
	if p.Webhook, err = freePort(); err != nil {
		return nil, p, err
	}
	if p.Health, err = freePort(); err != nil {
		return nil, p, err
	}
	if p.Metrics, err = freePort(); err != nil {
		return nil, p, err
	}
	if ctl.HealthPort != 0 {
		p.Health = ctl.HealthPort
	}
	caPEM, pair, err := writeServingCert(p.CertDir)
	if err != nil {
		return nil, p, err
	}
	for _, d := range ctl.FixedCertDirs {
		if err := writePair(d, pair); err != nil {
			return nil, p, fmt.Errorf("%s reads a certificate from %s: %w", ctl.Name, d, err)
		}
	}
	env := append([]string{"KUBECONFIG=" + c.Kubeconfig()}, ctl.Env...)
	if ctl.TempDirCerts {
		tmp := filepath.Join(dir, "tmp")
		if err := writePair(filepath.Join(tmp, "k8s-webhook-server", "serving-certs"), pair); err != nil {
			return nil, p, err
		}
		env = append(env, "TMPDIR="+tmp)
	}
	if ctl.Webhooks != "" {
		if p.webhookPaths, err = installWebhooks(ctx, client, ctl, filepath.Join(modDir, ctl.Webhooks), caPEM, p.Webhook); err != nil {
			return nil, p, err
		}
	}
	for _, name := range ctl.Secrets {
		_, err := client.CoreV1().Secrets(ctl.Namespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, p, err
		}
	}
	for name, content := range ctl.Files {
		if err := os.WriteFile(p.File(name), []byte(content), 0o644); err != nil {
			return nil, p, err
		}
	}
	args := ctl.Args
	if ctl.Config != nil {
		cfgPath := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(cfgPath, []byte(ctl.Config(p)), 0o644); err != nil {
			return nil, p, err
		}
		args = append([]string{"--config=" + cfgPath}, args...)
	}
	if ctl.Flags != nil {
		args = append(ctl.Flags(p), args...)
	}
	name := ctl.Name + "-controller"
	return &process{Name: name, Binary: bin, Args: args, Env: env, Log: c.layout.log(name)}, p, nil
}

// moduleDir is where the Go module cache holds c's module, at the version
// hack/integrations/<name> requires.
func moduleDir(root string, c Controller) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", c.Module)
	cmd.Dir = filepath.Join(root, "hack", "integrations", c.Name)
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locating module %s: %w", c.Module, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// writeServingCert writes a serving certificate for 127.0.0.1 signed by a
// fresh CA into dir (tls.crt, tls.key), and returns the CA and the pair.
func writeServingCert(dir string) ([]byte, *certs.Pair, error) {
	ca, err := certs.NewCA("e2e-controller-ca", 24*time.Hour)
	if err != nil {
		return nil, nil, err
	}
	pair, err := ca.Issue(certs.Request{CommonName: "127.0.0.1", IPs: []net.IP{net.ParseIP("127.0.0.1")}, Validity: 24 * time.Hour})
	if err != nil {
		return nil, nil, err
	}
	return ca.CertPEM, pair, writePair(dir, pair)
}

func writePair(dir string, pair *certs.Pair) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pair.CertPEM, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "tls.key"), pair.KeyPEM, 0o600)
}

// installWebhooks registers the manifest's webhooks for KeepWebhooks'
// resources, pointed at the local process, and returns their paths.
func installWebhooks(ctx context.Context, client kubernetes.Interface, c Controller, manifest string, caPEM []byte, port int) ([]string, error) {
	b, err := os.ReadFile(manifest)
	if err != nil {
		return nil, err
	}
	var paths []string
	at := func(cc admissionv1.WebhookClientConfig) admissionv1.WebhookClientConfig {
		path := ""
		if cc.Service != nil && cc.Service.Path != nil {
			path = *cc.Service.Path
		}
		paths = append(paths, path)
		return admissionv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:" + strconv.Itoa(port) + path), CABundle: caPEM}
	}
	kept := func(rules []admissionv1.RuleWithOperations) bool {
		for _, r := range rules {
			for _, res := range r.Resources {
				if slices.Contains(c.KeepWebhooks, res) {
					return true
				}
			}
		}
		return false
	}
	for _, doc := range bytes.Split(b, []byte("\n---")) {
		var kind struct{ Kind string }
		if err := yaml.Unmarshal(doc, &kind); err != nil {
			return nil, err
		}
		switch kind.Kind {
		case "MutatingWebhookConfiguration":
			cfg := &admissionv1.MutatingWebhookConfiguration{}
			if err := yaml.Unmarshal(doc, cfg); err != nil {
				return nil, err
			}
			out := &admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: c.Name + "-" + cfg.Name}}
			out.Webhooks = keepWebhooks(cfg.Webhooks, func(w *admissionv1.MutatingWebhook) webhookFields {
				return webhookFields{w.Name, w.Rules, &w.ClientConfig, &w.ObjectSelector, &w.NamespaceSelector}
			}, kept, at, c)
			if _, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, out, metav1.CreateOptions{}); err != nil {
				return nil, err
			}
		case "ValidatingWebhookConfiguration":
			cfg := &admissionv1.ValidatingWebhookConfiguration{}
			if err := yaml.Unmarshal(doc, cfg); err != nil {
				return nil, err
			}
			out := &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: c.Name + "-" + cfg.Name}}
			out.Webhooks = keepWebhooks(cfg.Webhooks, func(w *admissionv1.ValidatingWebhook) webhookFields {
				return webhookFields{w.Name, w.Rules, &w.ClientConfig, &w.ObjectSelector, &w.NamespaceSelector}
			}, kept, at, c)
			if _, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, out, metav1.CreateOptions{}); err != nil {
				return nil, err
			}
		}
	}
	return paths, nil
}

// webhookFields are what mutating and validating webhooks share (not a
// type): a webhook's name, rules, client config and selectors.
type webhookFields struct {
	name    string
	rules   []admissionv1.RuleWithOperations
	client  *admissionv1.WebhookClientConfig
	obj, ns **metav1.LabelSelector
}

// keepWebhooks are the webhooks whose rules kept takes, pointed at the
// local process (at) and narrowed by c's selectors.
func keepWebhooks[W any](ws []W, fields func(*W) webhookFields,
	kept func([]admissionv1.RuleWithOperations) bool, at func(admissionv1.WebhookClientConfig) admissionv1.WebhookClientConfig, c Controller) []W {
	var out []W
	for i := range ws {
		w := &ws[i]
		f := fields(w)
		if !kept(f.rules) {
			continue
		}
		*f.client = at(*f.client)
		if s, ok := c.ObjectSelectors[f.name]; ok {
			*f.obj = s
		}
		if s, ok := c.NamespaceSelectors[f.name]; ok {
			*f.ns = s
		}
		out = append(out, *w)
	}
	return out
}

// waitServing waits until the controller reports ready, its webhook port
// accepts TLS and each of its registered webhooks has a handler. A
// controller-runtime manager serves its webhook port before it registers
// the handlers (JobSet registers them once its certificates are in
// place), and the API server fails a create whose webhook answers 404.
func waitServing(ctx context.Context, c Controller, p ControllerPorts, exited <-chan struct{}, logPath string) error {
	client := &http.Client{Timeout: time.Second}
	name, path := c.Name, c.ReadyPath
	if path == "" {
		path = "/readyz"
	}
	for {
		ready := false
		if resp, err := client.Get("http://127.0.0.1:" + strconv.Itoa(p.Health) + path); err == nil {
			ready = resp.StatusCode == http.StatusOK
			resp.Body.Close()
		}
		if ready && c.NoWebhookServer {
			return nil
		}
		if ready && webhooksServed(p) {
			return nil
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(logPath)
			return fmt.Errorf("%s controller exited:\n%s", name, tailLines(string(b), 30))
		case <-ctx.Done():
			b, _ := os.ReadFile(logPath)
			return fmt.Errorf("%s controller not ready: %w\n%s", name, ctx.Err(), tailLines(string(b), 30))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// webhooksServed is whether p's webhook port serves each of its webhook
// paths: an admission handler answers a body that is not JSON with an
// error before reading it, an unregistered path is 404.
func webhooksServed(p ControllerPorts) bool {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer client.CloseIdleConnections()
	answers := func(path string) (int, bool) {
		resp, err := client.Post("https://127.0.0.1:"+strconv.Itoa(p.Webhook)+path, "text/plain", strings.NewReader("ready?"))
		if err != nil {
			return 0, false
		}
		resp.Body.Close()
		return resp.StatusCode, true
	}
	if len(p.webhookPaths) == 0 {
		_, ok := answers("/")
		return ok
	}
	for _, path := range p.webhookPaths {
		if code, ok := answers(path); !ok || code == http.StatusNotFound {
			return false
		}
	}
	return true
}

// freePort is a loopback port nothing listens on now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// tailLines is the last n lines of s.
func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Peers are the other projects' controllers `lockstep dev up
// --integrations` runs, in the order they start: Kubeflow Trainer runs a
// TrainJob as a JobSet, and Kueue's JobSet and TrainJob integrations
// expect their CRDs, so JobSet comes before both and Kueue last.
// Karpenter needs none of them.
var Peers = []Controller{JobSetController, TrainerController, LWSController, TrainingOperatorController, MPIOperatorController, KubeRayController, KarpenterController, KueueController}

// peerNeeds are the peers each peer cannot run without.
var peerNeeds = map[string][]string{TrainerController.Name: {JobSetController.Name}}

// SelectPeers resolves `--integrations` names to the peers to start, in
// start order; an unknown name, a name given twice or a peer given without
// one it needs is an error naming the fix.
func SelectPeers(names []string) ([]Controller, error) {
	known := map[string]bool{}
	var all []string
	for _, c := range Peers {
		known[c.Name] = true
		all = append(all, c.Name)
	}
	want := map[string]bool{}
	for _, n := range names {
		switch {
		case !known[n]:
			return nil, fmt.Errorf("--integrations: unknown integration %q: want any of %s", n, strings.Join(all, ","))
		case want[n]:
			return nil, fmt.Errorf("--integrations: %s given twice", n)
		}
		want[n] = true
	}
	for n := range want {
		for _, need := range peerNeeds[n] {
			if !want[need] {
				return nil, fmt.Errorf("--integrations: %s needs %s (its controller creates %s objects): add %s", n, need, need, need)
			}
		}
	}
	var out []Controller
	for _, c := range Peers {
		if want[c.Name] {
			out = append(out, c)
		}
	}
	return out, nil
}

// createPeerObjects creates ctl's Objects, keeping any that exist.
func (c *Cluster) createPeerObjects(ctx context.Context, ctl Controller) error {
	if len(ctl.Objects) == 0 {
		return nil
	}
	cfg, err := c.RESTConfig()
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, o := range ctl.Objects {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(o.Manifest), &u.Object); err != nil {
			return fmt.Errorf("%s object: %w", ctl.Name, err)
		}
		_, err := dyn.Resource(o.Resource).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}
