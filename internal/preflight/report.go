package preflight

// Status of one check.
type Status string

const (
	OK   Status = "ok"
	Info Status = "info"
	Warn Status = "warn"
	Fail Status = "fail"
)

// Check is one line of the report.
type Check struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// Driver is what one DRA driver publishes.
type Driver struct {
	Name    string `json:"name"`
	Nodes   int    `json:"nodes"`
	Devices int    `json:"devices"`
}

// Overlap is a node where a DRA driver and a device-plugin extended resource
// advertise the same kind of device.
type Overlap struct {
	Node             string `json:"node"`
	Driver           string `json:"driver"`
	ExtendedResource string `json:"extendedResource"`
	Fix              string `json:"fix"`
}

// Pool is a group of nodes supplied the same way, with the allocation path
// that supply model allows.
type Pool struct {
	Name           string `json:"name"`
	SupplyModel    string `json:"supplyModel"`
	Nodes          int    `json:"nodes"`
	Recommendation string `json:"recommendation"`
	Why            string `json:"why"`
}

// Report is the whole preflight answer.
type Report struct {
	KubernetesVersion string    `json:"kubernetesVersion"`
	Checks            []Check   `json:"checks"`
	Drivers           []Driver  `json:"draDrivers"`
	Overlaps          []Overlap `json:"oversubscriptionRisks"`
	Pools             []Pool    `json:"nodePools"`
	// Topology is what the nodes say of each topology key (topology.go).
	Topology []TopologyKey `json:"topology,omitempty"`
}

// Failed reports whether anything would make gangs or DRA fail.
func (r *Report) Failed() bool {
	for _, c := range r.Checks {
		if c.Status == Fail {
			return true
		}
	}
	return len(r.Overlaps) > 0
}

func (r *Report) add(name string, s Status, detail, fix string) {
	r.Checks = append(r.Checks, Check{Name: name, Status: s, Detail: detail, Fix: fix})
}
