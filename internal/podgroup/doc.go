// Package podgroup is the one vocabulary of groups and their members, below
// every package that needs it (scheduler, integrity controller, webhook,
// explain, CLI): which pods belong to which group and are Lockstep's, what
// state a member is in, a group's policy (gang or basic, minCount,
// disruptionMode, topology), its incarnations, condition helpers, and the
// API's resources and scheme. It is pure: nothing here calls the API server.
package podgroup
