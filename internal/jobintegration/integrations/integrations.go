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
	"github.com/lockstep-dev/lockstep/internal/jobintegration/lws"
	"github.com/lockstep-dev/lockstep/internal/podgroup"
)

// All are the integrations, in the order a pod is matched against them: an
// integration whose pods are also another's (a JobSet's pods belong to its
// Jobs) comes first.
func All() jobintegration.Set {
	return jobintegration.Set{
		jobset.Integration{},
		job.Integration{},
		lws.Integration{},
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
