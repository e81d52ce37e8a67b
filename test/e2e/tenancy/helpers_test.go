package tenancy

import (
	"context"
	"fmt"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/test/builders"
	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// tenant is a user confined to one namespace by RBAC, and its clients.
type tenant struct {
	user   string
	ns     string
	client kubernetes.Interface
	h      *harness.Harness // the harness with the tenant's clients
}

// newTenant grants user what a team member typically has in ns (pods,
// Jobs, PodGroups, claims) and returns clients that impersonate it.
func newTenant(t *testing.T, ctx context.Context, h *harness.Harness, ns, user string) *tenant {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "create", "update", "patch", "delete"}},
		{APIGroups: []string{lockv1.GroupVersion.Group}, Resources: []string{"podgroups"}, Verbs: []string{"get", "list", "create", "update", "patch", "delete"}},
		{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims", "resourceclaimtemplates"}, Verbs: []string{"get", "list", "create", "delete"}},
	}}
	if _, err := h.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "team"},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}}}
	if _, err := h.Client.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The API server's authorizer sees new RBAC objects through its own
	// cache: wait until it grants every rule, or the first request races it.
	harness.Eventually(t, ctx, "the tenant's Role in effect", func(ctx context.Context) (bool, string, error) {
		for _, rule := range role.Rules {
			for _, res := range rule.Resources {
				sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user,
					ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: rule.APIGroups[0], Resource: res}}}
				got, err := h.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
				if err != nil {
					return false, "", err
				}
				if !got.Status.Allowed {
					return false, "create " + res + " not yet allowed", nil
				}
			}
		}
		return true, "", nil
	})
	cfg := rest.CopyConfig(h.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &tenant{user: user, ns: ns, client: client, h: &harness.Harness{Client: client, Dynamic: dyn, Config: cfg}}
}

// priorityClass creates a cluster-wide PriorityClass, deleted with the test.
func priorityClass(t *testing.T, ctx context.Context, h *harness.Harness, name string, value int32) {
	t.Helper()
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
	if _, err := h.Client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.Client.SchedulingV1().PriorityClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// gpuGang creates a PodGroup (minCount n, class may be "") and n one-GPU
// member pods of podClass through client.
func gpuGang(t *testing.T, ctx context.Context, h *harness.Harness, client kubernetes.Interface, ns, name string, n int, groupClass, podClass string) {
	t.Helper()
	if _, err := h.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, builders.ClaimTemplate(ns, "one-gpu", "gpu.example.com", 1), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pg := builders.GangPodGroup(ns, name, int32(n))
	pg.Spec.PriorityClassName = groupClass
	h.CreatePodGroup(ctx, t, pg)
	for i := 0; i < n; i++ {
		if _, err := client.CoreV1().Pods(ns).Create(ctx, gpuPod(ns, fmt.Sprintf("%s-%d", name, i), name, podClass), metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating member %d of %s: %v", i, name, err)
		}
	}
}

func gpuPod(ns, name, group, class string) *corev1.Pod {
	p := builders.MakePod().Namespace(ns).Name(name).Member(group).Req(corev1.ResourceCPU, "1").ClaimTemplate("gpu", "one-gpu").Obj()
	p.Spec.PriorityClassName = class
	return p
}

func bound(t *testing.T, ctx context.Context, h *harness.Harness, ns, group string) int {
	t.Helper()
	_, n, err := h.GroupPods(ctx, ns, group)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
