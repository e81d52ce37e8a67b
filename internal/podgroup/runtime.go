package podgroup

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

// ParseMinRuntime reads a minimum runtime: a positive Go duration ("30m",
// "2h").
func ParseMinRuntime(v string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is not a positive duration: write a Go duration such as 30m or 2h", v)
	}
	return d, nil
}

// MinRuntime is the minimum runtime annotations ask for (a PodGroup's or a
// CompositePodGroup's metadata.annotations); set is false when they name
// none or one that does not parse (admission refuses those).
func MinRuntime(annotations map[string]string) (d time.Duration, set bool) {
	v, ok := annotations[lockv1.MinRuntimeAnnotation]
	if !ok {
		return 0, false
	}
	d, err := ParseMinRuntime(v)
	return d, err == nil
}

// ParseMinRuntimes reads the scheduler's per-PriorityClass minimum
// runtimes: "research=30m,batch=2h".
func ParseMinRuntimes(v string) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	for _, kv := range strings.Split(v, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		class, dur, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(class) == "" {
			return nil, field.Invalid(field.NewPath("min-runtime"), kv, "want <PriorityClass>=<duration>, e.g. research=30m")
		}
		d, err := ParseMinRuntime(dur)
		if err != nil {
			return nil, field.Invalid(field.NewPath("min-runtime").Key(class), dur, "not a positive duration: write a Go duration such as 30m or 2h")
		}
		out[strings.TrimSpace(class)] = d
	}
	return out, nil
}
