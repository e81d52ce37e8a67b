package config

import (
	"context"
	"testing"

	celgo "github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// This file evaluates match conditions and admission policy validations
// with kube-apiserver's own code (k8s.io/apiserver's admission CEL
// compiler, environment and activation, objects passed as the API server
// passes them), so what the tests say is what the API server does.

// apiserverCompiler is the compiler kube-apiserver uses for webhook match
// conditions and admission policies.
func apiserverCompiler() cel.ConditionCompiler {
	return cel.NewConditionCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
}

// request is one admission request: op on obj (old for UPDATE/DELETE) by
// username.
type request struct {
	op       admission.Operation
	obj, old client.Object
	gvk      schema.GroupVersionKind
	resource string
	username string
}

func (r request) attributes() *admission.VersionedAttributes {
	var obj, old runtime.Object
	if r.obj != nil {
		obj = r.obj
	}
	if r.old != nil {
		old = r.old
	}
	meta := r.obj
	if meta == nil {
		meta = r.old
	}
	gvr := r.gvk.GroupVersion().WithResource(r.resource)
	attrs := admission.NewAttributesRecord(obj, old, r.gvk, meta.GetNamespace(), meta.GetName(), gvr, "", r.op, nil, false, &user.DefaultInfo{Name: r.username})
	return &admission.VersionedAttributes{Attributes: attrs, VersionedKind: r.gvk,
		VersionedObject: admission.NewLazyObject(obj), VersionedOldObject: admission.NewLazyObject(old)}
}

// webhookMatches reports whether the API server calls the validating
// webhook w for req (its match conditions; its rules are not evaluated).
func webhookMatches(t *testing.T, w admissionv1.ValidatingWebhook, req request) bool {
	t.Helper()
	return matches(t, w.Name, w.MatchConditions, w.FailurePolicy, req)
}

// matches compiles and runs match conditions as the API server's webhook
// accessors do (k8s.io/apiserver/pkg/admission/plugin/webhook).
func matches(t *testing.T, name string, conds []admissionv1.MatchCondition, fp *admissionv1.FailurePolicyType, req request) bool {
	t.Helper()
	exprs := make([]cel.ExpressionAccessor, len(conds))
	for i, c := range conds {
		exprs[i] = &matchconditions.MatchCondition{Name: c.Name, Expression: c.Expression}
	}
	compiled := apiserverCompiler().CompileCondition(exprs, cel.OptionalVariableDeclarations{HasParams: false, HasAuthorizer: true}, environment.StoredExpressions)
	if errs := compiled.CompilationErrors(); len(errs) > 0 {
		t.Fatalf("match conditions of %s do not compile: %v", name, errs)
	}
	res := matchconditions.NewMatcher(compiled, fp, "webhook", "validating", name).Match(context.Background(), req.attributes(), nil, nil)
	if res.Error != nil {
		t.Fatalf("match conditions of %s: %v", name, res.Error)
	}
	return res.Matches
}

// boolExpression is a validation's expression as the compiler takes it.
type boolExpression string

func (e boolExpression) GetExpression() string      { return string(e) }
func (e boolExpression) ReturnTypes() []*celgo.Type { return []*celgo.Type{celgo.BoolType} }

// policyDenies evaluates a ValidatingAdmissionPolicy for req as the API
// server does: its match conditions, then each validation; it returns the
// message of the first that fails ("" when the request is admitted).
func policyDenies(t *testing.T, p *admissionv1.ValidatingAdmissionPolicy, req request) string {
	t.Helper()
	decls := cel.OptionalVariableDeclarations{HasParams: false, HasAuthorizer: true}
	va := req.attributes()
	areq := cel.CreateAdmissionRequest(va.Attributes, metav1.GroupVersionResource(va.GetResource()), metav1.GroupVersionKind(req.gvk))
	eval := func(exprs []string) []cel.EvaluationResult {
		acc := make([]cel.ExpressionAccessor, len(exprs))
		for i, e := range exprs {
			acc[i] = boolExpression(e)
		}
		cond := apiserverCompiler().CompileCondition(acc, decls, environment.StoredExpressions)
		if errs := cond.CompilationErrors(); len(errs) > 0 {
			t.Fatalf("compiling %s: %v", p.Name, errs)
		}
		out, _, err := cond.ForInput(context.Background(), va, areq, cel.OptionalVariableBindings{}, nil, celconfig.RuntimeCELCostBudget)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range out {
			if r.Error != nil {
				t.Fatalf("evaluating %q: %v", r.ExpressionAccessor.GetExpression(), r.Error)
			}
		}
		return out
	}
	var conds []string
	for _, c := range p.Spec.MatchConditions {
		conds = append(conds, c.Expression)
	}
	for _, r := range eval(conds) {
		if r.EvalResult != types.True {
			return ""
		}
	}
	var exprs []string
	for _, v := range p.Spec.Validations {
		exprs = append(exprs, v.Expression)
	}
	for i, r := range eval(exprs) {
		if r.EvalResult != types.True {
			return p.Spec.Validations[i].Message
		}
	}
	return ""
}
