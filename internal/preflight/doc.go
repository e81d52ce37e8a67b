// Package preflight reads a cluster and reports whether gangs and DRA can
// work on it: API versions served, whether Job spec.scheduling survives (the
// silent-prune detector), Lockstep's own components, DRA drivers, nodes where
// a DRA driver and a device plugin advertise the same device (silent
// oversubscription), on Amazon EKS, the DRA-or-device-plugin decision per
// node pool as the node supply model dictates it (seed 000 §8), and the
// topology keys — the zone, EKS's network node layers and every key a
// PodGroup uses: their domains, nodes missing them, keys that do not nest,
// one-node domains.
package preflight
