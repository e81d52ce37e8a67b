// Package integrations is the explicit list of the kinds of jobs Lockstep
// makes gangs of. Adding a kind is one folder under internal/jobintegration
// and one line here.
package integrations

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/lockstep-dev/lockstep/internal/jobintegration"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/job"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/jobset"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/kubeflow"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/lws"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/mpijob"
	"github.com/lockstep-dev/lockstep/internal/jobintegration/ray"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// All are the integrations, in the order a pod is matched against them: an
// integration whose pods are also another's (a JobSet's pods belong to its
// Jobs, an MPI launcher to its Job, a RayJob's to its RayCluster) comes
// first.
func All() jobintegration.Set {
	return jobintegration.Set{
		jobset.Integration{},
		mpijob.Integration{},
		job.Integration{},
		lws.Integration{},
		kubeflow.PyTorchJob,
		kubeflow.TFJob,
		kubeflow.XGBoostJob,
		kubeflow.PaddleJob,
		ray.Job{},
		ray.Cluster{},
	}
}

// Scheme is the scheme of Lockstep's own types and every integration's.
func Scheme() *runtime.Scheme {
	s := podgroup.Scheme()
	for _, integ := range All() {
		utilruntime.Must(integ.AddToScheme(s))
	}
	return s
}
