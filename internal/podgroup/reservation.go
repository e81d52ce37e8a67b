package podgroup

import (
	"crypto/sha256"
	"encoding/hex"
)

// UnitHash is a unit key (namespace/name) as a label or taint value (they
// cannot hold a slash): the value of the provisioned-for label and of the
// reserved-for taint on the nodes asked for on the unit's behalf.
func UnitHash(unit string) string {
	sum := sha256.Sum256([]byte(unit))
	return hex.EncodeToString(sum[:])[:20]
}
