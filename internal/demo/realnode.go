package demo

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/devcluster"
	"github.com/lockstep-dev/lockstep/internal/devcluster/gpudriver"
)

// realNamespace holds the jobs run on the real nodes.
const realNamespace = "demo-real-containers"

// realJobs are the gangs run on the real nodes: two, of two ranks with one
// GPU each, so that together they take every GPU of two real nodes.
var realJobs = []string{"train-a", "train-b"}

// runOnRealNodes runs realJobs as Lockstep gangs on the cluster's real
// nodes, as real containers of lockstep.local/rank, and prints per job the
// devices each rank says it was given.
func runOnRealNodes(ctx context.Context, client kubernetes.Interface, out io.Writer) error {
	fmt.Fprintln(out, "   the same kind of gang on real containers (real nodes: kubelet, containerd, the simulated-GPU DRA driver)")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: realNamespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return err
	}
	defer func() { _ = cleanUp(context.WithoutCancel(ctx), client, realNamespace) }()
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(realNamespace).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("namespace %s: no default ServiceAccount: %w", realNamespace, err)
	}
	tmpl := &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "one-gpu", Namespace: realNamespace},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: gpudriver.DefaultDriver}}},
		}}},
	}
	if _, err := client.ResourceV1().ResourceClaimTemplates(realNamespace).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		return err
	}
	for _, name := range realJobs {
		if _, err := client.BatchV1().Jobs(realNamespace).Create(ctx, rankJob(name), metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	lines := map[string][]string{}
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		lines, err = rankLines(ctx, client)
		if err != nil {
			return false, err
		}
		for _, name := range realJobs {
			if len(lines[name]) < 2 {
				return false, nil
			}
		}
		return true, nil
	})
	for _, name := range realJobs {
		fmt.Fprintf(out, "     %s: %s\n", name, strings.Join(lines[name], "; "))
	}
	if err != nil {
		return fmt.Errorf("waiting for the ranks on real containers: %w", err)
	}
	return nil
}

// rankJob is a 2-rank Indexed Job of lockstep.local/rank on the real nodes.
func rankJob(name string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: realNamespace},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](2), CompletionMode: ptr.To(batchv1.IndexedCompletion),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				SchedulerName:                 lockv1.SchedulerName,
				RestartPolicy:                 corev1.RestartPolicyNever,
				TerminationGracePeriodSeconds: ptr.To[int64](5),
				NodeSelector:                  map[string]string{devcluster.RealNodeLabel: "true"},
				Tolerations:                   []corev1.Toleration{devcluster.RealNodeToleration},
				ResourceClaims:                []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}},
				Containers: []corev1.Container{{
					Name: "rank", Image: devcluster.RankImage, ImagePullPolicy: corev1.PullNever,
					Env:       []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
					Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}},
				}},
			}},
		},
	}
}

// rankLines are, per job, the first line each running rank printed, with
// its node: "rank train-a-0-x7k2p saw devices gpu-0 on real-0".
func rankLines(ctx context.Context, client kubernetes.Interface) (map[string][]string, error) {
	pods, err := client.CoreV1().Pods(realNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning {
			continue
		}
		b, err := client.CoreV1().Pods(realNamespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: "rank"}).DoRaw(ctx)
		if err != nil {
			continue // not started yet
		}
		line, _, _ := strings.Cut(string(b), "\n")
		if line == "" {
			continue
		}
		job := p.Labels[batchv1.JobNameLabel]
		out[job] = append(out[job], line+" on "+p.Spec.NodeName)
	}
	for _, l := range out {
		slices.Sort(l)
	}
	return out, nil
}
