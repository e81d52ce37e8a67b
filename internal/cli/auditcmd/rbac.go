package auditcmd

import (
	"sort"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterRoleName is the read-only role docs/audit-clusterrole.yaml ships.
const ClusterRoleName = "lockstep-audit"

// ClusterRole grants list — the one verb the audit uses — on every
// resource it reads (Reads), and nothing else. Bound with a
// ClusterRoleBinding it audits the cluster (-A); with a RoleBinding, one
// namespace (-n).
func ClusterRole() *rbacv1.ClusterRole {
	byGroup := map[string][]string{}
	for _, gvr := range Reads() {
		byGroup[gvr.Group] = append(byGroup[gvr.Group], gvr.Resource)
	}
	groups := make([]string, 0, len(byGroup))
	for g := range byGroup {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	role := &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: ClusterRoleName, Labels: map[string]string{"app.kubernetes.io/name": "lockstep", "app.kubernetes.io/component": "audit"}},
	}
	for _, g := range groups {
		resources := unique(byGroup[g])
		role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: resources, Verbs: []string{"list"}})
	}
	return role
}

func unique(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
