package config

import (
	"testing"

	celgo "github.com/google/cel-go/cel"
	"k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/cel/environment"
)

// celEnv declares what the API server gives a webhook match condition.
func celEnv(t *testing.T) *celgo.Env {
	t.Helper()
	env, err := celgo.NewEnv(celgo.Variable("object", celgo.DynType), celgo.Variable("oldObject", celgo.DynType), celgo.Variable("request", celgo.DynType))
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func eval(t *testing.T, env *celgo.Env, expr string, vars map[string]any) bool {
	t.Helper()
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		t.Fatalf("compiling %s: %v", expr, iss.Err())
	}
	prg, err := env.Program(ast)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := prg.Eval(vars)
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return out.Value().(bool)
}

// Every match condition of every webhook compiles with kube-apiserver's
// compiler and environment (the API server refuses a configuration whose
// condition does not).
func TestMatchConditionsCompile(t *testing.T) {
	m, v := Configurations(Endpoint{URL: "https://127.0.0.1:9443"}, []string{"system:serviceaccount:kube-system:job-controller"})
	var exprs []cel.ExpressionAccessor
	for _, w := range m.Webhooks {
		for _, c := range w.MatchConditions {
			exprs = append(exprs, &matchconditions.MatchCondition{Name: c.Name, Expression: c.Expression})
		}
	}
	for _, w := range v.Webhooks {
		for _, c := range w.MatchConditions {
			exprs = append(exprs, &matchconditions.MatchCondition{Name: c.Name, Expression: c.Expression})
		}
	}
	compiled := apiserverCompiler().CompileCondition(exprs, cel.OptionalVariableDeclarations{HasAuthorizer: true}, environment.StoredExpressions)
	for _, err := range compiled.CompilationErrors() {
		t.Error(err)
	}
}

// The pod defaulting webhook sees a Lockstep pod that an operator created
// without its group (its job's template mutation was skipped), and one that
// names a Kueue pod group it has not joined (on creation or update), and no
// pod that needs nothing.
func TestPodDefaultsMatchOperatorPods(t *testing.T) {
	env := celEnv(t)
	expr := podNeedsDefaultsOf(integrationSet)
	pod := func(scheduler string, labels map[string]any, ownerAPIVersion, ownerKind string) map[string]any {
		meta := map[string]any{"name": "p"}
		if labels != nil {
			meta["labels"] = labels
		}
		if ownerKind != "" {
			meta["ownerReferences"] = []any{map[string]any{"apiVersion": ownerAPIVersion, "kind": ownerKind, "name": "j", "uid": "u", "controller": true}}
		}
		return map[string]any{"metadata": meta, "spec": map[string]any{"schedulerName": scheduler}}
	}
	bound := func(p map[string]any) map[string]any {
		p["spec"].(map[string]any)["nodeName"] = "worker-1"
		return p
	}
	kueue := map[string]any{"kueue.x-k8s.io/pod-group-name": "infer"}
	const create, update = "CREATE", "UPDATE"
	for name, tc := range map[string]struct {
		op   string
		pod  map[string]any
		want bool
	}{
		"a PyTorchJob's pod without its group":     {op: create, pod: pod("lockstep", nil, "kubeflow.org/v1", "PyTorchJob"), want: true},
		"an MPIJob's worker without its group":     {op: create, pod: pod("lockstep", nil, "kubeflow.org/v2beta1", "MPIJob"), want: true},
		"a RayCluster's pod without its group":     {op: create, pod: pod("lockstep", nil, "ray.io/v1", "RayCluster"), want: true},
		"a Job's pod without its group":            {op: create, pod: pod("lockstep", nil, "batch/v1", "Job"), want: true},
		"a PyTorchJob's pod in its group":          {op: create, pod: pod("lockstep", map[string]any{"scheduling.lockstep.dev/pod-group": "j"}, "kubeflow.org/v1", "PyTorchJob")},
		"a PyTorchJob's pod for another scheduler": {op: create, pod: pod("default-scheduler", nil, "kubeflow.org/v1", "PyTorchJob")},
		"a ReplicaSet's Lockstep pod":              {op: create, pod: pod("lockstep", nil, "apps/v1", "ReplicaSet")},
		"a Job's pod updated":                      {op: update, pod: pod("lockstep", nil, "batch/v1", "Job")},
		"a plain pod in a Kueue group":             {op: create, pod: pod("lockstep", kueue, "", ""), want: true},
		"a StatefulSet's pod Kueue labels":         {op: update, pod: pod("lockstep", kueue, "apps/v1", "StatefulSet"), want: true},
		"a Kueue group's pod already joined":       {op: update, pod: pod("lockstep", map[string]any{"kueue.x-k8s.io/pod-group-name": "infer", "scheduling.lockstep.dev/pod-group": "infer"}, "", "")},
		"a bound pod Kueue labels":                 {op: update, pod: bound(pod("lockstep", kueue, "apps/v1", "StatefulSet"))},
		"another scheduler's pod in a Kueue group": {op: create, pod: pod("default-scheduler", kueue, "", "")},
		"a Lockstep pod updated, no Kueue group":   {op: update, pod: pod("lockstep", map[string]any{"app": "x"}, "apps/v1", "StatefulSet")},
	} {
		t.Run(name, func(t *testing.T) {
			if got := eval(t, env, expr, map[string]any{"object": tc.pod, "oldObject": nil, "request": map[string]any{"operation": tc.op}}); got != tc.want {
				t.Errorf("match = %v, want %v", got, tc.want)
			}
		})
	}
}
