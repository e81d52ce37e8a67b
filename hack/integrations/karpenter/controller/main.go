// Command controller is Karpenter's core controllers (sigs.k8s.io/karpenter,
// the version ../go.mod pins) with its kwok cloud provider, as
// sigs.k8s.io/karpenter/kwok wires them, plus two things the e2e tests and
// `lockstep dev up --integrations karpenter` need: launches that fail on
// command, and DRA ResourceSlices for the nodes it launches.
// hack/build-tools.sh builds it into bin/karpenter-controller.
//
// # Instance types
//
// kwok's: the JSON file --instance-types-file-path (or
// INSTANCE_TYPES_FILE_PATH) names, in kwok/cloudprovider/instance_types.json's
// format; without it kwok's own several hundred types. A launched NodeClaim
// becomes a kwok Node (annotation kwok.x-k8s.io/node), which a kwok started
// with --manage-all-nodes=true turns Ready. Its status.capacity is the
// instance type's (kwok alone would copy the NodeClaim's requests there);
// its hostname label is the NodeClaim's name, not the Node's (kwok's
// choice).
//
// # Capacity on command
//
// The ConfigMap karpenter-capacity in --capacity-namespace (default
// karpenter) limits launches: data key "<instance-type>.<zone>" (for example
// gpu-8x.zone-b) holds how many more launches of that instance type in that
// zone succeed; a type and zone without a key are unlimited, as is every
// offering when the ConfigMap does not exist. A launch takes the cheapest
// offering the NodeClaim's requirements allow (ties: the order of the
// instance types file, then of its offerings) among those with capacity
// left, and decrements its key. When every offering the NodeClaim allows is
// at 0, Create returns cloudprovider.InsufficientCapacityError: Karpenter
// publishes a Warning event InsufficientCapacityError on the NodeClaim and
// deletes it (it sets no condition). From then on, as a real provider's
// unavailable-offerings cache does, the offerings that failed are reported
// unavailable to Karpenter's scheduler while their key stays at 0, so
// Karpenter provisions elsewhere; raising or removing the key makes them
// available again. A malformed value (not a non-negative integer) fails the
// launch with an ordinary error (condition Launched Unknown, reason
// LaunchFailed), so the mistake is loud.
//
// # ResourceSlices
//
// Karpenter's dra-kwok-driver's ResourceSlice controller
// (sigs.k8s.io/karpenter/dra-kwok-driver/pkg/controllers, the same module)
// runs in this process on Karpenter's manager: for every node with the
// kwok.x-k8s.io/node annotation that a DRAConfig (test.karpenter.sh/v1alpha1)
// pool selects, it publishes that pool's devices in a ResourceSlice named
// after the driver, the node and the pool, with spec.nodeName set and the
// Node as owner (so slices go with their node). Its own main is not used: it
// serves fixed ports (8082, 8083 on every interface), which two clusters on
// one machine cannot share, and reconciles only every 30 s; here it also runs
// whenever a Node is created, deleted or relabelled or a DRAConfig changes,
// so a launched node has its slices within a second of appearing.
//
// Karpenter's --ignore-dra-requests stays at its default, true: Karpenter's
// own scheduling simulation does not look at pods' ResourceClaims.
package main

import (
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/log"

	drav1alpha1 "sigs.k8s.io/karpenter/dra-kwok-driver/pkg/apis/v1alpha1"
	kwok "sigs.k8s.io/karpenter/kwok/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/overlay"
	"sigs.k8s.io/karpenter/pkg/controllers"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/operator"
	"sigs.k8s.io/karpenter/pkg/operator/options"
)

func main() {
	// Karpenter's manager uses client-go's scheme; the DRAConfig type joins it.
	if err := drav1alpha1.AddToScheme(scheme.Scheme); err != nil {
		panic(err)
	}
	options.Injectables = append(options.Injectables, &Options{})
	ctx, op := operator.NewOperator()
	logger := log.FromContext(ctx)
	instanceTypes, err := kwok.ConstructInstanceTypes(ctx)
	if err != nil {
		logger.Error(err, "failed constructing instance types")
	}
	limited := newCapacityLimited(kwok.NewCloudProvider(ctx, op.GetClient(), instanceTypes),
		op.KubernetesInterface, FromContext(ctx).CapacityNamespace)
	cloudProvider := overlay.Decorate(limited, op.GetClient(), op.InstanceTypeStore)
	clusterState := state.NewCluster(op.Clock, op.GetClient(), cloudProvider)
	op.WithControllers(ctx, controllers.NewControllers(ctx, op.Manager, op.Clock, op.GetClient(), op.EventRecorder,
		cloudProvider, limited, clusterState, op.InstanceTypeStore)...)
	if err := limited.start(ctx, op.Manager); err != nil {
		logger.Error(err, "failed starting the capacity ConfigMap informer")
		panic(err)
	}
	if err := registerResourceSlices(op.Manager); err != nil {
		logger.Error(err, "failed registering the ResourceSlice controller")
		panic(err)
	}
	op.Start(ctx)
}
