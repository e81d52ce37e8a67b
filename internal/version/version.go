// Package version holds the build's version strings.
package version

// Lockstep is set at link time by the Makefile (-X); "dev" otherwise.
var Lockstep = "dev"

// KubernetesLibraries is the k8s.io/* line Lockstep is built against.
const KubernetesLibraries = "v0.37.2"
