// Package topology decides which sets of nodes a unit may be placed in:
// its domains. A unit's Constraint has
//
//   - required levels: node label keys (upstream's
//     spec.schedulingConstraints.topology); every member runs in one domain
//     of each — the nodes sharing one value of every required key;
//   - preferred levels: node label keys, narrowest first (Lockstep's
//     scheduling.lockstep.dev/preferred-topology annotation); the unit is
//     tried in the domains of the first, then the second, …, then in the
//     required domains as a whole — never wider than a required level;
//   - a device attribute (scheduling.lockstep.dev/device-topology): every
//     member's devices that carry it share its value (an NVLink clique, an
//     IMEX domain), so a GB200-class rack is a domain without node labels.
//
// Plan orders the domains to try, level by level:
//
//	preferred[0] domains (each inside a required domain) ──► preferred[1] …
//	   ──► required domains ──► (no required level) every node
//
// and pins them to where a running unit already is: members placed after
// its admission (a resize, members beyond minCount, a retry, a
// replacement) may only go to the required domain of its running members,
// and try the preferred domains those members share first.
//
// Levels nest when every value of the inner key lies in one value of the
// outer (a rack in one block, a block in one zone); Nesting reports keys
// that do not, for preflight and admission. It is pure: it reads a
// snapshot and never calls the API server.
package topology
