// Package clientopts is how every lockstep command reaches a cluster.
//
// Its flags are kubectl's, from cli-runtime's ConfigFlags: --kubeconfig,
// --context, -n/--namespace and the other connection flags for the commands
// a user runs (audit, explain, get, preflight); --kubeconfig and --context for the
// long-running components (scheduler, controllers, webhook). The kubeconfig
// is found as kubectl finds it: --kubeconfig alone if given, else the files
// of $KUBECONFIG merged in order (missing ones skipped), else
// ~/.kube/config; with none of them, the in-cluster service account of the
// pod the command runs in. -A/--all-namespaces is offered where a command
// lists.
//
// Complete resolves the flags into a REST config and a namespace without
// calling the API server; its errors name what was missing and the flag or
// variable that fixes it.
package clientopts
