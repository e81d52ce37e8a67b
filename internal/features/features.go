// Package features is the one description of the Kubernetes behaviours the
// decision core follows where a feature gate governs them: which DRA
// allocator features are on, how a pod's requests are computed, whether
// extended resources can be backed by DRA, whether pods need nodes that
// declare features. A Features value is built once where a component is
// wired (Default) and passed in — to the snapshot, which carries it to the
// allocator and placement — never read from a global inside a decision,
// as k8s.io/dynamic-resource-allocation/structured takes its Features.
package features

import (
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-helpers/resource"
	"k8s.io/dynamic-resource-allocation/structured"
	kubefeatures "k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
)

// Features are the gated behaviours of one decision core.
type Features struct {
	// Allocator are the DRA allocator's features: prioritized lists,
	// partitionable devices, admin access, device taints, consumable
	// capacity, binding conditions, …
	Allocator structured.Features
	// InPlacePodVerticalScaling, PodLevelResources and
	// InPlacePodLevelResourcesVerticalScaling govern a pod's requests
	// (PodResourcesOptions).
	InPlacePodVerticalScaling               bool
	PodLevelResources                       bool
	InPlacePodLevelResourcesVerticalScaling bool
	// DRAExtendedResource: extended resources can be served by a DeviceClass.
	DRAExtendedResource bool
	// NodeDeclaredFeatures: pods that need a node feature go only to nodes
	// that declare it.
	NodeDeclaredFeatures bool
}

// Default are kube-scheduler 1.37's: its feature gates at their defaults
// (k8s.io/kubernetes/pkg/features), mapped to the allocator's features by
// kube-scheduler's own code (dynamicresources.AllocatorFeatures), so what
// Lockstep decides is what kube-scheduler would.
func Default() Features { return FromGates(utilfeature.DefaultFeatureGate) }

// FromGates maps feature gates to Features.
func FromGates(gates featuregate.FeatureGate) Features {
	return Features{
		Allocator:                               dynamicresources.AllocatorFeatures(plfeature.NewSchedulerFeaturesFromGates(gates)),
		InPlacePodVerticalScaling:               gates.Enabled(kubefeatures.InPlacePodVerticalScaling),
		PodLevelResources:                       gates.Enabled(kubefeatures.PodLevelResources),
		InPlacePodLevelResourcesVerticalScaling: gates.Enabled(kubefeatures.InPlacePodLevelResourcesVerticalScaling),
		DRAExtendedResource:                     gates.Enabled(kubefeatures.DRAExtendedResource),
		NodeDeclaredFeatures:                    gates.Enabled(kubefeatures.NodeDeclaredFeatures),
	}
}

// PodResourcesOptions are the options kube-scheduler computes a pod's
// requests with.
func (f Features) PodResourcesOptions() resource.PodResourcesOptions {
	return resource.PodResourcesOptions{
		UseStatusResources:                             f.InPlacePodVerticalScaling,
		SkipPodLevelResources:                          !f.PodLevelResources,
		InPlacePodLevelResourcesVerticalScalingEnabled: f.InPlacePodLevelResourcesVerticalScaling,
	}
}
