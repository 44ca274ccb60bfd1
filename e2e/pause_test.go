package e2e

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
)

// written is what a write outside status leaves on an object: its generation, labels,
// annotations, owners, spec and the field managers that wrote it outside status, with their
// times. A request that changes nothing leaves it as it was.
func written(m metav1.Object, spec any) string {
	var managers []string
	for _, mf := range m.GetManagedFields() {
		if mf.Subresource == "status" {
			continue
		}
		at := ""
		if mf.Time != nil {
			at = mf.Time.UTC().Format(time.RFC3339)
		}
		managers = append(managers, fmt.Sprintf("%s/%s@%s:%s", mf.Manager, mf.Operation, at, mf.FieldsV1))
	}
	b, _ := json.Marshal(map[string]any{"uid": m.GetUID(), "generation": m.GetGeneration(), "labels": m.GetLabels(),
		"annotations": m.GetAnnotations(), "owners": m.GetOwnerReferences(), "finalizers": m.GetFinalizers(), "spec": spec, "managers": managers})
	return string(b)
}

// ownedObjects reads every object of the namespace the operator writes for a fleet, but Pods
// (kubelets write them) and Events: kind/name -> written.
func (f *fixture) ownedObjects() map[string]string {
	f.t.Helper()
	out := map[string]string{}
	ctx, ns := f.ctx, f.ns
	must := func(err error) {
		if err != nil {
			f.t.Fatalf("list: %v", err)
		}
	}
	sets, err := suite.kube.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
	must(err)
	for i := range sets.Items {
		out["StatefulSet/"+sets.Items[i].Name] = written(&sets.Items[i], sets.Items[i].Spec)
	}
	deps, err := suite.kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	must(err)
	for i := range deps.Items {
		out["Deployment/"+deps.Items[i].Name] = written(&deps.Items[i], deps.Items[i].Spec)
	}
	svcs, err := suite.kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	must(err)
	for i := range svcs.Items {
		out["Service/"+svcs.Items[i].Name] = written(&svcs.Items[i], svcs.Items[i].Spec)
	}
	pdbs, err := suite.kube.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
	must(err)
	for i := range pdbs.Items {
		out["PodDisruptionBudget/"+pdbs.Items[i].Name] = written(&pdbs.Items[i], pdbs.Items[i].Spec)
	}
	nps, err := suite.kube.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
	must(err)
	for i := range nps.Items {
		out["NetworkPolicy/"+nps.Items[i].Name] = written(&nps.Items[i], nps.Items[i].Spec)
	}
	pvcs, err := suite.kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	must(err)
	for i := range pvcs.Items {
		out["PersistentVolumeClaim/"+pvcs.Items[i].Name] = written(&pvcs.Items[i], pvcs.Items[i].Spec)
	}
	res, err := suite.celld.CelldV1alpha1().CelldReservations(ns).List(ctx, metav1.ListOptions{})
	must(err)
	for i := range res.Items {
		// The capacity history is the reservation's status, and a decision of the operator.
		out["CelldReservation/"+res.Items[i].Name] = written(&res.Items[i], []any{res.Items[i].Spec, res.Items[i].Status})
	}
	fleets, err := suite.celld.CelldV1alpha1().CelldFleets(ns).List(ctx, metav1.ListOptions{})
	must(err)
	for i := range fleets.Items {
		// The fleet's finalizer is the operator's; its spec and annotations are the person's.
		out["CelldFleet/"+fleets.Items[i].Name+"/finalizers"] = strings.Join(fleets.Items[i].Finalizers, ",")
	}
	return out
}

func diffObjects(before, after map[string]string) []string {
	var out []string
	for k, v := range after {
		if before[k] != v {
			out = append(out, fmt.Sprintf("%s\n  was %s\n  now %s", k, before[k], v))
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			out = append(out, k+" deleted")
		}
	}
	sort.Strings(out)
	return out
}

// TestPauseAndResume: `kubectl celld pause` stops every write to a fleet's objects while its
// spec changes (more members, a new image) and even while it is deleted; the fleet says so in a
// ReconciliationPaused condition. `kubectl celld resume` catches up in one decision: the
// StatefulSet goes 3 -> 5 in one change, on the new image, and the deletion completes.
func TestPauseAndResume(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startOperator()
	fl := f.create(f.newFleet("held", v1alpha1.ProfilePersistentFleet, 3))
	f.waitConverged(fl.Name)
	sets := f.recordStatefulSets()

	if out, stderr, err := f.kubectlCelld("pause", fl.Name, "-n", f.ns); err != nil || !strings.Contains(out, "paused") {
		t.Fatalf("kubectl celld pause: %v: %s %s", err, out, stderr)
	}
	paused := func(fl *v1alpha1.CelldFleet) bool {
		c := condition(fl, v1alpha1.ConditionReconciliationPaused)
		return c.Status == metav1.ConditionTrue && c.ObservedGeneration == fl.Generation && fl.Status.ObservedGeneration == fl.Generation
	}
	f.waitFleet(fl.Name, time.Minute, "ReconciliationPaused", paused)
	before := f.ownedObjects()
	fl = f.update(fl.Name, func(fl *v1alpha1.CelldFleet) {
		fl.Spec.Members = 5
		fl.Spec.Image += "-next"
	})
	fl = f.waitFleet(fl.Name, time.Minute, "the new spec seen while paused", paused)
	if c := condition(fl, v1alpha1.ConditionReconciliationPaused); !strings.Contains(c.Message, "kubectl celld resume "+fl.Name) {
		t.Errorf("ReconciliationPaused says %q; want how to resume", c.Message)
	}
	// Long enough for several resyncs and the workload controller's own writes.
	time.Sleep(8 * time.Second)
	if d := diffObjects(before, f.ownedObjects()); len(d) > 0 {
		t.Fatalf("paused, yet the fleet's objects were written:\n%s", strings.Join(d, "\n"))
	}
	out, _, err := f.kubectlCelld("status", fl.Name, "-n", f.ns)
	if err != nil || !strings.Contains(out, "ReconciliationPaused  True") {
		t.Errorf("kubectl celld status of a paused fleet: %v\n%s", err, out)
	}

	if out, stderr, err := f.kubectlCelld("resume", fl.Name, "-n", f.ns); err != nil || !strings.Contains(out, "resumed") {
		t.Fatalf("kubectl celld resume: %v: %s %s", err, out, stderr)
	}
	fl = f.waitConverged(fl.Name)
	if c := condition(fl, v1alpha1.ConditionReconciliationPaused); c.Status != "absent" {
		t.Errorf("resumed, yet %s=%s", c.Type, c.Status)
	}
	grow := statefulSetChanges(sets.Await(t, "rolled out at 5", rolledOutAt(fl.Name, 5)), fl.Name)
	if len(grow) != 1 || grow[0].from != 3 || grow[0].to != 5 {
		t.Errorf("resumed: want one change 3->5 of spec.replicas, got %+v", grow)
	}
	for _, p := range f.members(fl) {
		if img := p.Spec.Containers[0].Image; img != fl.Spec.Image {
			t.Errorf("member %s runs %s, want %s", p.Name, img, fl.Spec.Image)
		}
	}

	// Paused while being deleted: the finalizer stays, nothing is written; resumed, it goes.
	if _, stderr, err := f.kubectlCelld("pause", fl.Name, "-n", f.ns); err != nil {
		t.Fatalf("kubectl celld pause: %v: %s", err, stderr)
	}
	f.waitFleet(fl.Name, time.Minute, "ReconciliationPaused", paused)
	before = f.ownedObjects()
	if err := suite.celld.CelldV1alpha1().CelldFleets(f.ns).Delete(f.ctx, fl.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(8 * time.Second)
	if d := diffObjects(before, f.ownedObjects()); len(d) > 0 {
		t.Fatalf("paused and deleted, yet the fleet's objects were written:\n%s", strings.Join(d, "\n"))
	}
	if _, stderr, err := f.kubectlCelld("resume", fl.Name, "-n", f.ns); err != nil {
		t.Fatalf("kubectl celld resume: %v: %s", err, stderr)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := suite.celld.CelldV1alpha1().CelldFleets(f.ns).Get(f.ctx, fl.Name, metav1.GetOptions{}); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("resumed, the deleted fleet is still there after 2m")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestRollingRestart: `kubectl celld restart` replaces every member of each workload kind once,
// one at a time: by the cluster's record, every member Pod of before is deleted once by the
// workload's controller, never while another member is missing or not ready, and no Pod by the
// operator (it records a Healing Event for every Pod it deletes).
func TestRollingRestart(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startOperator()
	for _, profile := range []v1alpha1.Profile{v1alpha1.ProfilePersistentFleet, v1alpha1.ProfileBucket} {
		name := strings.ToLower(string(profile))
		fl := f.create(f.newFleet(name, profile, 3))
		fl = f.waitConverged(fl.Name)
		old := map[types.UID]string{}
		for _, p := range f.members(fl) {
			old[p.UID] = p.Name
		}
		pods := f.recordPods()
		if out, stderr, err := f.kubectlCelld("restart", fl.Name, "-n", f.ns); err != nil || !strings.Contains(out, "restart requested") {
			t.Fatalf("kubectl celld restart: %v: %s %s", err, out, stderr)
		}
		fl = f.waitFleet(fl.Name, 3*time.Minute, "every member replaced and ready", func(fl *v1alpha1.CelldFleet) bool {
			if !converged(fl) {
				return false
			}
			members := f.members(fl)
			for _, p := range members {
				if _, was := old[p.UID]; was || !podReady(&p) {
					return false
				}
			}
			return len(members) == 3
		})
		evs := pods.Events(t)
		gone := deletions(evs)
		for uid, n := range old {
			if gone[uid].requested.IsZero() {
				t.Errorf("%s: member %s (%s) was not replaced", profile, n, uid)
			}
		}
		// One at a time: replay the watch, counting the members ready at each moment.
		ready := map[types.UID]bool{}
		least := 3
		for _, e := range evs {
			p, ok := e.Obj.(*corev1.Pod)
			if !ok || p.Labels[kinds.LabelFleetUID] != string(fl.UID) {
				continue
			}
			ready[p.UID] = e.Type != watch.Deleted && podReady(p)
			n := 0
			for _, r := range ready {
				if r {
					n++
				}
			}
			if n < least && len(ready) >= 3 {
				least = n
			}
		}
		if least < 2 {
			t.Errorf("%s: the restart took %d members away at once (ready members fell to %d)", profile, 3-least, least)
		}
		evList, err := suite.kube.CoreV1().Events(f.ns).List(f.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evList.Items {
			if e.Reason == "Healing" {
				t.Errorf("%s: the operator deleted a Pod during the restart: %s", profile, e.Message)
			}
		}
		t.Logf("%s: 3 members replaced one at a time; ready members never below %d", profile, least)
	}
}
