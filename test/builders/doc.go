// Package builders has fluent builders for the API objects tests create, in
// the style of kube-scheduler's testing wrappers:
//
//	builders.MakePod().Name("a").Namespace(ns).Req("cpu", "1").Claim("gpu", "tmpl").Obj()
package builders
