// Package harness is the one shared e2e helper: it brings up a local control
// plane (package devcluster) for a test package, or reuses a running one named
// by LOCKSTEP_E2E_KUBECONFIG, hands out clients and a fresh namespace per test,
// dumps the relevant objects and component logs when a test fails, and always
// tears down what it started.
//
//	func TestMain(m *testing.M) { harness.Main(m, harness.Options{Profile: devcluster.ProfileEKS}) }
//
//	func TestX(t *testing.T) {
//		h := harness.Get(t)
//		ns := h.Namespace(t)
//		ctx := harness.Context(t, time.Minute)
//		...
//	}
package harness
