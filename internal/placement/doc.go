// Package placement decides where the pods of one unit (a gang, a basic
// group or a lone pod) go, on an in-memory snapshot. It never calls the API
// server: it returns assignments (pod → node, plus the device allocations
// made for the pod's claims) and, for pods it could not place, a diagnosis
// counting the nodes that failed each reason. What a result means for the
// unit — admitted or not, who waits — is Judge's answer (Outcome), the one
// every caller reads.
//
// The algorithm, for a unit of members with minCount m of which b are bound:
//
//  1. Members are grouped by signature: pods whose scheduling-relevant spec is
//     the same (requests, selectors, affinity, tolerations, host ports, claim
//     specs) are interchangeable, so node filtering runs once per signature
//     and nodes found full for one member are skipped for the rest of it:
//     within a cycle capacity only shrinks. A 1,000-pod homogeneous gang costs
//     one pass over the nodes, not 1,000.
//  2. Signatures are placed most-constrained first (fewest feasible nodes).
//  3. Within a signature, feasible nodes are tried tightest first (fewest free
//     devices, then least free CPU and memory) and a node is filled before the
//     next is opened, so large free blocks stay free for the next gang. Nodes
//     without room for one member as the attempt starts are tried last, and
//     the order is produced as it is read (tightest.go).
//  4. A gang is admitted if b + placed ≥ m and binds what was placed;
//     otherwise every tentative placement is rolled back and, for a gang of
//     several signatures, up to maxOrders other signature orders are tried
//     before giving up. A basic group or lone pod binds whatever fits.
//  5. With topology (topology.PlanFor: required label keys, preferred levels
//     narrowest first, a device attribute whose values are domains too), a
//     gang is tried domain by domain — the narrowest preferred level first,
//     the tightest domain first — and placed in the first that admits it; a
//     running gang stays in the domain it runs in. An elastic gang (minCount
//     below its pending members) takes the domain that holds the most of
//     them (placeElastic). Members that hold no device may use a
//     device-attribute domain's open nodes (CPU nodes carrying no device
//     with the attribute).
//  6. A unit's capacity types (Unit.CapacityTypes: on-demand, reserved, spot)
//     leave nodes of other types out, counted in the diagnosis.
//  7. Devices are allocated by the DRA allocator of
//     k8s.io/dynamic-resource-allocation/structured, per node; a failure it
//     reports for one node only (an invalid pool) filters that node out, as
//     kube-scheduler's DynamicResources plugin does.
//
// A scheduling tree (PlaceTree) is placed top-down, each node inside its
// parent's domain, siblings searched with backtracking within a budget;
// TreeSummary words the best attempt when it does not fit.
//
// For a homogeneous gang whose pods need only node-local resources and no
// inter-pod constraints, the greedy fill is complete: placing a pod on one
// node never reduces what fits on another, so if a placement of m pods
// exists, it is found. Heterogeneous gangs, inter-pod affinity and
// topology spread are searched greedily and may be refused although a
// placement exists.
package placement
