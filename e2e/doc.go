// Package e2e holds the end-to-end tests: the operator, built from this tree and run as a process,
// against the local control plane of cluster/ (a real kube-apiserver, kube-controller-manager and
// kube-scheduler, with kwok faking the nodes and the Pods' status).
//
// TestMain builds the control plane if needed (cluster/build.sh: about 8 minutes cold, seconds
// warm), starts it (cluster/up.sh), installs the CRDs of deploy/crds and builds the operator. It
// fails, and never skips, when any of that fails. A control plane that was already running is left
// running; one the suite started is stopped at the end (E2E_KEEP_CLUSTER=1 keeps it).
//
// Every test runs in a namespace of its own, under the restricted Pod Security Standard, with its
// own operator process restricted to that namespace (--namespace), so tests do not see each other's
// fleets and can run in parallel. Tests that take nodes away run first and alone. An operator
// started by hand for every namespace would also act on the tests' fleets: stop it first. The demo
// (make demo) manages its own namespace only and may keep running.
//
//	make e2e                      # this package alone, verbose
//	go test -count=1 -timeout 80m ./e2e -run TestGrowAndShrink -v
//
// TestLeastPrivilege and TestPodSecurity install parts of deploy/ for real (the celld-system
// namespace, the RBAC, the operator's Deployment, whose Pods kwok runs without pulling the image),
// shared between them and removed after the last, unless they were installed before by someone
// else.
//
// The operators' logs are kept under .cache/e2e/logs. The tests' namespaces carry the label
// e2e.celld.io/test=true; TestMain sweeps those an interrupted run left behind (older than 90
// minutes), and the operators die with the test binary.
package e2e
