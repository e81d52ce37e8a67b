package config

import (
	"fmt"
	"strconv"
	"strings"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

// CEL building blocks of match conditions and admission policies. Each
// returns an expression over objects as the API server gives them to CEL
// (what their JSON has: unset optional fields are absent).

// sameBut is true when objects (or maps) a and b have the same keys and
// values, but for the keys in except.
func sameBut(a, b string, except ...string) string {
	quoted := make([]string, len(except))
	for i, e := range except {
		quoted[i] = strconv.Quote(e)
	}
	return fmt.Sprintf(`(%[1]s.all(k, k in %[3]s || (k in %[2]s && %[1]s[k] == %[2]s[k])) && %[2]s.all(k, k in %[3]s || k in %[1]s))`,
		a, b, "["+strings.Join(quoted, ", ")+"]")
}

// sameWithPrefix is true when maps a and b (which may be absent) have the
// same entries among the keys that begin with prefix.
func sameWithPrefix(a, b, prefix string) string {
	p := strconv.Quote(prefix)
	return fmt.Sprintf(`(%[1]s.orValue({}).all(k, !k.startsWith(%[3]s) || (k in %[2]s.orValue({}) && %[2]s.orValue({})[k] == %[1]s.orValue({})[k])) && %[2]s.orValue({}).all(k, !k.startsWith(%[3]s) || k in %[1]s.orValue({})))`,
		a, b, p)
}

// celGroupOf is the PodGroup a pod object names, as podgroup.GroupOf reads it:
// the membership label, else spec.schedulingGroup.podGroupName, else "".
func celGroupOf(pod string) string {
	label := fmt.Sprintf(`%s.metadata.?labels[?%q].orValue("")`, pod, lockv1.PodGroupLabel)
	return fmt.Sprintf(`(%[1]s != "" ? %[1]s : %[2]s.spec.?schedulingGroup.?podGroupName.orValue(""))`, label, pod)
}
