package jobintegration

import lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"

// PodGroups are the PodGroups the reconciler creates for a job whose
// groups are groups (Groups), owned by the job: the same objects for a
// caller that plays the controller without an API server (`lockstep
// simulate`), so a simulated job becomes the gangs the real one would.
// The error (a *NotQualified) explains a bad disruption-mode annotation,
// for which the reconciler makes no gang. A job whose roles make a tree
// (Ray, elastic Kubeflow jobs, MPIJobs) is refused: the simulator has no
// scheduling trees yet.
func PodGroups(j GenericJob, groups []Group) ([]*lockv1.PodGroup, error) {
	mode, err := DisruptionMode(j)
	if err != nil {
		return nil, err
	}
	pgs, root, _ := desired(j, groups, mode)
	if root != nil {
		return nil, &NotQualified{Condition: "its roles keep their own minimums (a scheduling tree, CompositePodGroup " + root.Name + ")", Fix: "simulate it as one gang (scheduling.lockstep.dev/min-count) or leave it out: lockstep simulate has no scheduling trees yet"}
	}
	return pgs, nil
}
