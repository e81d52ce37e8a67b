package jobintegration

import lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"

// PodGroups are the PodGroups the reconciler creates for a job whose
// groups are groups (Groups), owned by the job, and — for a job whose
// roles make a scheduling tree (Ray, elastic Kubeflow jobs, MPIJobs) — the
// root CompositePodGroup they hang under (nil otherwise): the same objects
// for a caller that plays the controller without an API server (`lockstep
// simulate`), so a simulated job becomes the gangs the real one would.
// The error (a *NotQualified) explains a bad disruption-mode annotation,
// for which the reconciler makes no gang.
func PodGroups(j GenericJob, groups []Group) ([]*lockv1.PodGroup, *lockv1.CompositePodGroup, error) {
	mode, err := DisruptionMode(j)
	if err != nil {
		return nil, nil, err
	}
	pgs, root, _ := desired(j, groups, mode)
	return pgs, root, nil
}
