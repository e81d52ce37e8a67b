package audit

import (
	"context"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
	"github.com/lockstep-dev/lockstep/internal/jobintegration"
)

// Input is what an audit reads: lists of objects as the API server returned
// them, and the time of the audit.
type Input struct {
	Now  time.Time
	Pods []*corev1.Pod
	// Jobs are objects of the integrations' kinds (typed: batch/v1 Job,
	// JobSet, PyTorchJob, …, as Integration.NewObject makes them).
	Jobs []client.Object
	// Owners are the other objects an integration follows from a pod to
	// its job (a LeaderWorkerSet's StatefulSets).
	Owners         []client.Object
	Claims         []*resourcev1.ResourceClaim
	ClaimTemplates []*resourcev1.ResourceClaimTemplate
	// PodGroups are Lockstep's and the API server's (scheduling.k8s.io)
	// groups, read into Lockstep's type.
	PodGroups []*lockv1.PodGroup
	// Events are Preempted events of pods.
	Events []*corev1.Event
	// Notes are what reading left out (a kind the user may not list).
	Notes []string
}

// Options tune the reconstruction.
type Options struct {
	// Grace is how long a start takes: a partial episode shorter than it
	// that ended whole is the scheduler binding pod by pod, not counted;
	// a pod created after the workload had run whole for Grace, growing it
	// past its largest size, is a scale-up; siblings disrupted within it
	// of each other are one takedown.
	Grace time.Duration
}

// DefaultGrace is Options.Grace unless set.
const DefaultGrace = 30 * time.Second

// objects indexes the input's objects for Integration.OwnerOf, which reads
// the objects between a pod and its job through a Getter.
type objects map[objectKey]client.Object

type objectKey struct {
	typ             reflect.Type
	namespace, name string
}

var _ jobintegration.Getter = objects(nil)

func index(in *Input) objects {
	o := objects{}
	add := func(obj client.Object) {
		o[objectKey{reflect.TypeOf(obj), obj.GetNamespace(), obj.GetName()}] = obj
	}
	for _, j := range in.Jobs {
		add(j)
	}
	for _, j := range in.Owners {
		add(j)
	}
	for _, p := range in.Pods {
		add(p)
	}
	return o
}

// Get implements jobintegration.Getter: it copies the object of obj's type
// named key into obj, or returns NotFound.
func (o objects) Get(_ context.Context, key types.NamespacedName, obj client.Object) error {
	found, ok := o[objectKey{reflect.TypeOf(obj), key.Namespace, key.Name}]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: reflect.TypeOf(obj).Elem().Name()}, key.Name)
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(found).Elem())
	return nil
}

// lookup is the object of the type of empty named ns/name, nil if none.
func (o objects) lookup(empty client.Object, ns, name string) client.Object {
	return o[objectKey{reflect.TypeOf(empty), ns, name}]
}
