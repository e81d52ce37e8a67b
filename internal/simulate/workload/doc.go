// Package workload is what `lockstep simulate` replays: the objects a user
// would apply, decoded strictly and defaulted as the API server defaults
// them, each job built as its controller and Lockstep's integration build
// it — its pods, its PodGroups and, for a job whose roles make a
// scheduling tree, their root CompositePodGroup (Load) — and everything
// the simulator does not model refused with the object and the field path
// (ObjectError, ErrInvalid). Failures and generated mixes (kind Failure,
// Mix) are read here too.
package workload
