// Package sim is an in-memory Kubernetes cluster: the operator's twin of the API server and of
// the controllers it relies on (StatefulSet, Deployment, scheduler, kubelet, garbage collector,
// PVC protection), driven by a virtual clock and by explicit Tick calls, with no goroutines and
// no randomness of its own. The same run always gives the same cluster.
//
// It applies the machine's actions the way the real driver does (Do), emits every change as an
// Event for the caller to fold into an Store (Drain, Resync), injects faults (lost
// and unreachable nodes, crashed members, broken images, write conflicts), and records what the
// safety contract is about (replica writes, Pod and PVC deletions) so property tests can check it.
//
// What it models of Kubernetes, and what it simplifies, is said where each piece lives: the
// StatefulSet controller follows pkg/controller/statefulset (OrderedReady is monotonic, so a
// member that is not ready on an old revision blocks a rolling update forever, kubernetes#67250);
// Deployments own their Pods directly (no ReplicaSet objects); the API server's defaulting of
// the workload kinds is applied, as a real server would, unless Options.NoDefaults is set; and
// objects come out without apiVersion and kind, as typed informers hand them out.
package sim
