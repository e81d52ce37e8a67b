package podgroup

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	lockv1 "github.com/lockstep-dev/lockstep/api/v1beta1"
)

// ParseMinRuntime reads a positive Go duration ("30m", "2h"): a minimum
// runtime or a preemption notice.
func ParseMinRuntime(v string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is not a positive duration: write a Go duration such as 30m or 2h", v)
	}
	return d, nil
}

// durationAnnotation is the duration annotation key names; set is false
// when there is none or one that does not parse (admission refuses those).
func durationAnnotation(annotations map[string]string, key string) (d time.Duration, set bool) {
	v, ok := annotations[key]
	if !ok {
		return 0, false
	}
	d, err := ParseMinRuntime(v)
	return d, err == nil
}

// MinRuntime is the minimum runtime annotations ask for (a PodGroup's or a
// CompositePodGroup's metadata.annotations).
func MinRuntime(annotations map[string]string) (d time.Duration, set bool) {
	return durationAnnotation(annotations, lockv1.MinRuntimeAnnotation)
}

// PreemptionNotice is the preemption notice annotations ask for.
func PreemptionNotice(annotations map[string]string) (d time.Duration, set bool) {
	return durationAnnotation(annotations, lockv1.PreemptionNoticeAnnotation)
}

// MaxRuntime is the runtime annotations declare the group ends within.
func MaxRuntime(annotations map[string]string) (d time.Duration, set bool) {
	return durationAnnotation(annotations, lockv1.MaxRuntimeAnnotation)
}

// PreemptionDelay is how long annotations ask the group to wait before
// it preempts.
func PreemptionDelay(annotations map[string]string) (d time.Duration, set bool) {
	return durationAnnotation(annotations, lockv1.PreemptionDelayAnnotation)
}

// PreemptionDelayOf is a unit's preemption delay: its annotations' (the
// group's or tree root's), else byClass for its pods' PriorityClass
// (--preemption-delay); zero for none.
func PreemptionDelayOf(annotations map[string]string, class string, byClass map[string]time.Duration) time.Duration {
	if d, ok := PreemptionDelay(annotations); ok {
		return d
	}
	return byClass[class]
}

// TimeAnnotation reads an RFC 3339 time annotation (checkpointed-at,
// preemption-pending); zero when absent or unreadable.
func TimeAnnotation(annotations map[string]string, key string) time.Time {
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(annotations[key]))
	if err != nil {
		return time.Time{}
	}
	return t
}

// ParseMinRuntimes reads the scheduler's per-PriorityClass minimum
// runtimes: "research=30m,batch=2h".
func ParseMinRuntimes(v string) (map[string]time.Duration, error) {
	return ParseClassDurations("min-runtime", v)
}

// ParseClassDurations reads a per-PriorityClass duration flag (flag names
// it in errors): "research=30m,batch=2h".
func ParseClassDurations(flag, v string) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	for _, kv := range strings.Split(v, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		class, dur, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(class) == "" {
			return nil, field.Invalid(field.NewPath(flag), kv, "want <PriorityClass>=<duration>, e.g. research=30m")
		}
		d, err := ParseMinRuntime(dur)
		if err != nil {
			return nil, field.Invalid(field.NewPath(flag).Key(class), dur, "not a positive duration: write a Go duration such as 30m or 2h")
		}
		out[strings.TrimSpace(class)] = d
	}
	return out, nil
}
