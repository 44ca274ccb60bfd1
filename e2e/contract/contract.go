// Package contract records what the API server did to a namespace's fleets and judges it,
// afterwards, against the safety contract (SPEC section 5) as far as the API shows it: how
// workloads were resized, and which Pods and claims were deleted, and when. The end-to-end tests
// on the kwok nodes and on the real nodes share it, so a lifecycle is judged the same way on both.
package contract

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/celld/celld-operator/api/generated/clientset/versioned"
)

// Contract is the recorders of every kind the judge reads.
type Contract struct {
	kinds []kind
	ns    string
	// auditLog is the API server's audit log that says who asked for each Pod's deletion, empty
	// when the judge has none.
	auditLog string
}

type kind struct {
	rec  *Recorder
	list func(context.Context) (runtime.Object, error)
	// initial is how many of the recorder's first events came from its list: versions that were
	// already there, not writes seen happening.
	initial int
}

// Watch starts recording (list + resumed watch, no version skipped) the fleets, StatefulSets,
// Deployments and their ReplicaSets, Pods and PVCs of namespace ns, and Nodes, until ctx ends or
// the test is cleaned up. Start it before the fleets it is to judge are created.
func Watch(ctx context.Context, t testing.TB, kube kubernetes.Interface, celld versioned.Interface, ns string) *Contract {
	t.Helper()
	return watchWith(t, kube, celld, ns, func(s Source) *Recorder { return Record(ctx, t, s) })
}

// WatchAcrossRestarts is Watch with recorders that list again where a watch cannot resume (see
// RecordAcrossRestarts): across an API server's restart, or an update of the CRDs that moves
// their storage version, which starts the API server's watch of their objects anew.
func WatchAcrossRestarts(ctx context.Context, t testing.TB, kube kubernetes.Interface, celld versioned.Interface, ns string, logf func(string, ...any)) *Contract {
	t.Helper()
	return watchWith(t, kube, celld, ns, func(s Source) *Recorder { return RecordAcrossRestarts(ctx, t, s, logf) })
}

func watchWith(t testing.TB, kube kubernetes.Interface, celld versioned.Interface, ns string, record func(Source) *Recorder) *Contract {
	t.Helper()
	apps, core := kube.AppsV1(), kube.CoreV1()
	fleets := celld.CelldV1alpha1().CelldFleets(ns)
	sources := []Source{
		ListWatch("celldfleets", fleets.List, fleets.Watch),
		ListWatch("statefulsets", apps.StatefulSets(ns).List, apps.StatefulSets(ns).Watch),
		ListWatch("deployments", apps.Deployments(ns).List, apps.Deployments(ns).Watch),
		ListWatch("replicasets", apps.ReplicaSets(ns).List, apps.ReplicaSets(ns).Watch),
		ListWatch("pods", core.Pods(ns).List, core.Pods(ns).Watch),
		ListWatch("persistentvolumeclaims", core.PersistentVolumeClaims(ns).List, core.PersistentVolumeClaims(ns).Watch),
		ListWatch("nodes", core.Nodes().List, core.Nodes().Watch),
	}
	c := &Contract{ns: ns}
	for _, s := range sources {
		r := record(s)
		// The list's versions all carry the one time the list returned; a watch event is stamped
		// later, when it arrives.
		r.mu.Lock()
		n := 0
		for n < len(r.evs) && r.evs[n].Type == watch.Added && r.evs[n].At.Equal(r.evs[0].At) {
			n++
		}
		r.mu.Unlock()
		c.kinds = append(c.kinds, kind{rec: r, list: s.List, initial: n})
	}
	return c
}

// AttributeBy has the judge read, from the API server's audit log at path, who asked for each
// Pod's deletion: a member a drain evicted is judged by the drain's clause (no eviction takes a
// second member away), not as the operator's deletion. The log must record Pod evictions and
// deletes (cluster/up.sh's audit policy does).
func (c *Contract) AttributeBy(path string) { c.auditLog = path }

// Judgement judges the whole recorded history. It first waits until every watch has caught up
// with the API server, so that nothing written before the call is judged without what explains
// it.
func (c *Contract) Judgement(t testing.TB) (Verdict, int) {
	t.Helper()
	c.sync(t)
	var all []Entry
	for _, k := range c.kinds {
		for i, s := range k.rec.Events(t) {
			all = append(all, Entry{Seen: s, Initial: i < k.initial})
		}
	}
	var requests []Request
	if c.auditLog != "" {
		var err error
		if requests, err = ReadAudit(c.auditLog, c.ns); err != nil {
			t.Fatalf("contract: %v", err)
		}
	}
	return Judge(all, requests), len(all)
}

// Verify judges the whole recorded history, reports each violation with t.Errorf (object,
// time/resourceVersion, clause in words) and returns the number of checks it made.
func (c *Contract) Verify(t testing.TB) int {
	t.Helper()
	v, versions := c.Judgement(t)
	for _, msg := range v.Violations {
		t.Errorf("contract: %s", msg)
	}
	t.Logf("contract: %d checks over %d recorded versions, %d violations; %s", v.Checks, versions, len(v.Violations), v.Summary())
	return v.Checks
}

// sync waits until each recorder's latest versions are what a fresh list shows.
func (c *Contract) sync(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for _, k := range c.kinds {
		for {
			l, err := k.list(context.Background())
			if err != nil {
				t.Fatalf("list %s: %v", k.rec.What, err)
			}
			items, err := meta.ExtractList(l)
			if err != nil {
				t.Fatalf("list %s: %v", k.rec.What, err)
			}
			lag := behind(k.rec.Events(t), items)
			if lag == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("watch of %s did not catch up with the API server: %s", k.rec.What, lag)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// behind says how a recorder's history differs from a list: a listed version not seen yet, or an
// object seen alive that the list no longer has. Empty when caught up.
func behind(evs []Seen, items []runtime.Object) string {
	type last struct {
		rv   uint64
		gone bool
		name string
	}
	seenAt := map[types.UID]last{}
	for _, e := range evs {
		m := e.Meta()
		seenAt[m.GetUID()] = last{rv: ResourceVersion(m), gone: e.Type == watch.Deleted, name: m.GetName()}
	}
	listed := map[types.UID]bool{}
	for _, o := range items {
		m, err := meta.Accessor(o)
		if err != nil {
			return err.Error()
		}
		listed[m.GetUID()] = true
		if s, ok := seenAt[m.GetUID()]; !ok || s.gone || s.rv < ResourceVersion(m) {
			return fmt.Sprintf("%s at resource version %s not seen", m.GetName(), m.GetResourceVersion())
		}
	}
	for uid, s := range seenAt {
		if !s.gone && !listed[uid] {
			return fmt.Sprintf("%s (%s) gone, not seen deleted", s.name, uid)
		}
	}
	return ""
}
