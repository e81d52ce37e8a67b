// Package podquota answers whether a namespace's ResourceQuotas leave room
// for one more pod like a given one, counting as the API server's
// ResourceQuota admission does (the pod evaluator of
// k8s.io/kubernetes/pkg/quota: scopes, scope selectors, requests, limits,
// extended resources, pod counts) from the quotas' hard limits and the pods
// that exist. It is pure: the caller passes the quotas and pods it read.
package podquota
