package machine

import (
	"fmt"
	"math/rand"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"pgregory.net/rapid"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/kinds"
)

// The ops a lifecycle sequence is made of.
type op int

const (
	opPass        op = iota // the operator observes (maybe through a lagging cache), decides and acts
	opTick                  // controllers and kubelets take a step
	opTime                  // time passes
	opMembers               // the user asks for another size
	opNodeDown              // a node goes NotReady
	opNodeGone              // a node is deleted
	opNodeBack              // a node comes back
	opCrash                 // a member's container stops being ready, and stays so
	opRecover               // crashed containers start again
	opClaimLost             // a member's claim is Lost
	opDelete                // the user deletes the fleet
	opRestart               // the operator restarts
	opForeignDisk           // a claim of another fleet's UID appears under the fleet's name
	opStrayDisk             // a claim carrying the fleet's UID but made by hand appears
	opFence                 // a person fences a NotReady node (the out-of-service taint)
	opHibernate             // the user sets spec.hibernate, or sets it back to false
	opCount
)

var opNames = []string{"pass", "tick", "time", "members", "node-down", "node-gone", "node-back", "crash", "recover",
	"claim-lost", "delete", "restart", "foreign-disk", "stray-disk", "fence", "hibernate"}

// weights make passes and ticks the common case and faults routine.
var opWeights = []int{30, 30, 6, 6, 3, 2, 4, 3, 3, 2, 1, 2, 1, 1, 2, 3}

// draw picks the ops and their arguments: rapid for the property test, a seeded source for the
// coverage test's fixed sequences.
type draw interface {
	intn(n int, label string) int
}

type rapidDraw struct{ t *rapid.T }

func (d rapidDraw) intn(n int, label string) int { return rapid.IntRange(0, n-1).Draw(d.t, label) }

// queueDraw answers from a script's list, then 0.
type queueDraw struct{ vals *[]int }

func (d queueDraw) intn(n int, _ string) int {
	if len(*d.vals) == 0 {
		return 0
	}
	v := (*d.vals)[0]
	*d.vals = (*d.vals)[1:]
	return v % n
}

type randDraw struct{ r *rand.Rand }

func (d randDraw) intn(n int, _ string) int { return d.r.Intn(n) }

func pickOp(d draw) op {
	total := 0
	for _, w := range opWeights {
		total += w
	}
	n := d.intn(total, "op")
	for i, w := range opWeights {
		if n < w {
			return op(i)
		}
		n -= w
	}
	return opPass
}

// tb is what a sequence needs of *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

// run is one lifecycle sequence under the judges.
type run struct {
	t       tb
	w       *world
	m       *Fleet
	profile v1alpha1.Profile
	edges   map[string]int
	lag     bool
	// unheld: the fleet went away before it carried the finalizer.
	unheld bool
	// unsynced: the next pass sees no node, and knows its node cache has not synced.
	unsynced bool
	// kept are the claims, by name, a hibernation found when it stopped the workload: the wake
	// must find each of them, under the same UID.
	kept map[string]string
}

func newRun(t tb, profile v1alpha1.Profile, members int32, edges map[string]int) *run {
	return &run{t: t, w: newWorld(profile, members), m: New(), profile: profile, edges: edges}
}

func (r *run) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("%s\nstory:\n  %s", fmt.Sprintf(format, args...), strings.Join(r.w.log, "\n  "))
}

func (r *run) do(o op, d draw) {
	w := r.w
	if o != opPass && o != opTick {
		w.say("%s", opNames[o])
	}
	nodes := sortedKeys(w.nodes)
	switch o {
	case opPass:
		obs := w.observe()
		if r.lag && len(w.past) > 1 {
			// The cache lags; the clock does not.
			stale := *w.past[d.intn(len(w.past), "lag")]
			stale.Now = w.now
			obs = &stale
		}
		if r.unsynced {
			cold := *obs
			cold.Nodes, cold.NodesSynced = map[string]*corev1.Node{}, false
			obs, r.unsynced = &cold, false
		}
		r.pass(obs)
	case opTick:
		w.tick()
	case opTime:
		w.now = w.now.Add(time.Duration(1+d.intn(200, "seconds")) * time.Second)
	case opMembers:
		// The API server refuses a new size while the fleet stays hibernated (a CEL rule).
		if w.fleet != nil && w.fleet.DeletionTimestamp == nil && !w.fleet.Spec.Hibernate {
			w.fleet.Spec.Members = int32(1 + d.intn(5, "members"))
			w.fleet.Generation++
			w.fleet.ResourceVersion = fmt.Sprint(len(w.log))
			w.say("members=%d", w.fleet.Spec.Members)
		}
		r.lag = d.intn(3, "lag") == 0
	case opNodeDown, opNodeGone:
		if len(nodes) == 0 {
			return
		}
		name := nodes[d.intn(len(nodes), "node")]
		// The node lifecycle controller marks the node's Pods not ready (after
		// node-monitor-grace, here at once): premises read Pods, not their nodes.
		for _, p := range w.pods {
			if p.Spec.NodeName == name && podReady(p) {
				setPodReady(p, false, w.now)
			}
		}
		if o == opNodeGone {
			delete(w.nodes, name)
			w.say("node %s gone", name)
			return
		}
		n := w.nodes[name]
		if events.NodeHealth(n).Ready {
			// The node lifecycle controller's own taint: unreachable is no fence.
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, LastTransitionTime: metav1.NewTime(w.now)}}
			n.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: w.now}}}
			w.say("node %s NotReady", name)
		}
	case opNodeBack:
		for i := 0; i < 4; i++ {
			name := fmt.Sprintf("n%d", i)
			if n := w.nodes[name]; n == nil {
				w.addNode(name)
				return
			} else if !events.NodeHealth(n).Ready {
				n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(w.now)}}
				n.Spec.Taints = nil
				return
			}
		}
	case opCrash:
		if pods := w.members(); len(pods) > 0 {
			p := pods[d.intn(len(pods), "pod")]
			w.broken[p.Name] = true
			if podReady(p) {
				setPodReady(p, false, w.now)
			}
			w.say("pod %s not ready", p.Name)
		}
	case opRecover:
		w.broken = map[string]bool{}
	case opClaimLost:
		if claims := sortedKeys(w.pvcs); len(claims) > 0 {
			c := w.pvcs[claims[d.intn(len(claims), "claim")]]
			c.Status.Phase = corev1.ClaimLost
			w.say("claim %s lost", c.Name)
		}
	case opDelete:
		if f := w.fleet; f != nil && f.DeletionTimestamp == nil {
			now := metav1.NewTime(w.now)
			f.DeletionTimestamp = &now
			if len(f.Finalizers) == 0 {
				// Gone before the operator could hold it: what it made is left to the user.
				w.fleet, r.unheld = nil, true
			}
		}
	case opHibernate:
		if f := w.fleet; f != nil && f.DeletionTimestamp == nil {
			f.Spec.Hibernate = !f.Spec.Hibernate
			f.Generation++
			f.ResourceVersion = fmt.Sprint(len(w.log))
			w.say("hibernate=%t", f.Spec.Hibernate)
		}
	case opRestart:
		// A new operator: its node cache has not synced on its first pass.
		r.m, r.unsynced = New(), true
	case opFence:
		for _, name := range nodes {
			if n := w.nodes[name]; !events.NodeHealth(n).Ready && !events.NodeHealth(n).Fenced {
				n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute})
				w.say("node %s fenced", name)
				return
			}
		}
	case opForeignDisk, opStrayDisk:
		uid, name := "uid-other-fleet", "data-a-9"
		if o == opStrayDisk {
			// Made by hand while the fleet lives: one made during its deletion races the
			// finalizer's removal, which no premise covers.
			if w.fleet == nil || w.fleet.DeletionTimestamp != nil {
				return
			}
			// Under a name its StatefulSet would give a claim, or one it would not.
			uid, name = string(w.fleet.UID), []string{"data-a-8", "data-a-08"}[d.intn(2, "name")]
		}
		if _, ok := w.pvcs[name]; !ok {
			w.pvcs[name] = &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: worldNS, UID: w.newUID(),
				Labels: map[string]string{kinds.LabelInstance: worldName, kinds.LabelFleetUID: uid}}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
		}
	}
}

// pass is one operator pass: observe, decide, judge the decision, then act in order, each
// action behind its premise (the first refusal ends the pass, as in the drivers).
func (r *run) pass(obs *events.Observation) {
	r.t.Helper()
	w := r.w
	v := events.Normalize(worldNS, worldName, obs)
	d := r.m.Step(&v)
	if v.Fleet == nil {
		return
	}
	for _, tr := range d.Transitions {
		r.edges[edge(tr.From, tr.To, tr.Trigger)]++
		w.say("%s -> %s (%s)", tr.From, tr.To, tr.Trigger)
	}
	r.judgeDecision(&v, d)
	for _, a := range d.Actions {
		if a.Kind == Requeue {
			continue
		}
		if err := a.Premise.Check(w.fresh(a.Premise)); err != nil {
			w.say("premise refused %s: %v", a.Key, err)
			return
		}
		r.judgeAction(&v, d, a)
		if err := w.apply(a); err != nil {
			w.say("%v", err)
			return
		}
		if a.Kind != PublishStatus && a.Kind != RecordEvent {
			w.say("%s", a)
		}
	}
}

func edge(from, to v1alpha1.FleetState, tr Trigger) string {
	return fmt.Sprintf("%s --> %s : %s", from, to, tr)
}

func stsReplicas(a Action) (int32, bool) {
	if s, ok := a.Object.(*appsv1.StatefulSet); ok && a.Kind == Apply {
		return *s.Spec.Replicas, true
	}
	return 0, false
}

// nonStatus is the decision apart from what publishes its status: the status write, and the
// Warning that announces a Degraded reason the published status does not carry yet (it goes out
// with the write that publishes it, so it follows the stored status by design). The Event that
// names the disks a step deletes is left out too: the machine names each disk once, so a fresh
// machine names again what the running one named already. So is the Event that a resize ended:
// it goes out with the first status that says so.
func nonStatus(d Decision) []string {
	var out []string
	for _, a := range d.Actions {
		if a.Kind != PublishStatus && !strings.HasPrefix(a.Key, "event/degraded/") && !strings.HasPrefix(a.Key, "event/disks/") &&
			!strings.HasPrefix(a.Key, "event/hibernation/") && !strings.HasPrefix(a.Key, "event/wake/") &&
			!strings.HasPrefix(a.Key, ResizeDoneEventPrefix) && !strings.HasPrefix(a.Key, StatusRequeuePrefix) {
			out = append(out, a.String())
		}
	}
	return out
}

// judgeDecision checks what a decision asks for against the view it was made on, by rules
// written here, not by the machine's own facts.
func (r *run) judgeDecision(v *events.View, d Decision) {
	r.t.Helper()
	current, target := v.Workload.Replicas, v.Fleet.Spec.Members
	var applied []int32
	heals := 0
	for _, a := range d.Actions {
		if n, ok := stsReplicas(a); ok {
			applied = append(applied, n)
		}
		if a.Kind == DeletePod {
			heals++
		}
	}
	// Clause 2: growth reaches the target in one step.
	for _, n := range applied {
		if !v.Deleting && n > current && n != target {
			r.fatalf("clause 2: the workload is at %d and the fleet asks for %d: it grows to %d", current, target, n)
		}
	}
	// A state a decision enters is its effect: ShrinkingOne is one member fewer, Growing the
	// whole target, written in the same decision.
	for _, tr := range d.Transitions {
		want := int32(-1)
		switch tr.To {
		case v1alpha1.StateShrinkingOne:
			want = current - 1
		case v1alpha1.StateGrowing:
			want = target
		}
		if want >= 0 && (len(applied) != 1 || applied[0] != want) {
			r.fatalf("%s -> %s (%s) with the workload at %d writes %v, want %d", tr.From, tr.To, tr.Trigger, current, applied, want)
		}
	}
	// Clause 1's exception: only a fleet that asks to hibernate stops its workload, and one that
	// sleeps is given none.
	for _, a := range d.Actions {
		_, sized := stsReplicas(a)
		switch {
		case a.Kind == StopWorkload && (!v.Fleet.Spec.Hibernate || v.Deleting):
			r.fatalf("clause 1: the workload stopped at once while the fleet does not ask to hibernate")
		case sized && (d.To == v1alpha1.StateHibernating || d.To == v1alpha1.StateHibernated):
			r.fatalf("a hibernating fleet is given a workload: %s", a)
		}
	}
	// Clause 3: one member at a time, only in Healing, and Healing is that one deletion.
	if heals > 1 || (heals == 1) != (d.To == v1alpha1.StateHealing) {
		r.fatalf("clause 3: %d Pod deletions in a decision ending in %s", heals, d.To)
	}
	for _, a := range d.Actions {
		switch n, ok := stsReplicas(a); {
		case a.Kind == DeletePod:
			// Clauses 1, 3 on the decision's own view: a lagging cache is the premise's business,
			// a wrong decision is not. An ordered StatefulSet creates nothing above a member that
			// is not ready: members missing above the one replaced are its consequence.
			if why := viewUnsettled(v, a.Name); why != "" && !missingAboveOnly(v, a.Name, why) {
				r.fatalf("clause 3: heal of %s decided while %s", a.Name, why)
			}
			others := map[string]bool{}
			if a.Premise != nil {
				for _, m := range a.Premise.Ready {
					others[m] = true
				}
			}
			for _, m := range v.Members {
				if m.Name != a.Name && !others[m.Name] {
					r.fatalf("clause 3: the heal of %s does not ask that %s still be ready when it goes out", a.Name, m.Name)
				}
			}
			if a.Force && (a.Premise == nil || a.Premise.Node == "") {
				r.fatalf("clause 3: the forced heal of %s does not ask that its node still be gone or fenced", a.Name)
			}
		case ok && !v.Deleting && n < current:
			if why := viewUnsettled(v, ""); why != "" {
				r.fatalf("clause 1: scale-in from %d decided while %s", current, why)
			}
			ready := map[string]bool{}
			if a.Premise != nil {
				for _, m := range a.Premise.Ready {
					ready[m] = true
				}
			}
			for _, m := range v.Members {
				if !ready[m.Name] {
					r.fatalf("clause 1: the scale-in does not ask that %s still be ready when it goes out", m.Name)
				}
			}
			if a.Premise == nil || !a.Premise.RolledOut {
				r.fatalf("clause 1: the scale-in does not ask that the last change be rolled out when it goes out")
			}
		}
	}
	r.judgeStatus(v, d)
	// Clause 5: a fresh machine fed the same view with no status, or a wrong one, decides the same.
	for i, stored := range []v1alpha1.CelldFleetStatus{{}, {State: v1alpha1.StateShrinkingOne, Members: v1alpha1.MemberCounts{Desired: 9, Ready: 9}}} {
		tv := *v
		tv.Fleet = v.Fleet.DeepCopy()
		tv.Fleet.Status = stored
		twin := New().Step(&tv)
		if got, want := nonStatus(twin), nonStatus(d); strings.Join(got, "\n") != strings.Join(want, "\n") {
			r.fatalf("clause 5: stored status #%d changes the decision:\n  with it: %v %s->%s\n  as stored: %v %s->%s asleep=%v stopped=%v", i, got, twin.From, twin.To, want, d.From, d.To, v.Asleep, v.AsleepStopped)
		}
		if !statusEqual(&twin.Status, &d.Status) {
			r.fatalf("clause 5: stored status #%d changes the status:\n  with it: %+v\n  as stored: %+v", i, twin.Status, d.Status)
		}
	}
	// Clause 6: with the history cleared, a scale-in is never allowed earlier.
	hv := *v
	hv.Reservation.History = nil
	for _, a := range New().Step(&hv).Actions {
		if n, ok := stsReplicas(a); ok && n < current && !v.Deleting {
			shrinks := false
			for _, m := range applied {
				shrinks = shrinks || m < current
			}
			if !shrinks {
				r.fatalf("clause 6: with the history cleared the fleet scales in to %d; with it, it does not", n)
			}
		}
	}
}

// viewUnsettled says why the view shows a fleet that may not lose a member (but the one named),
// "" when it may: the workload's controller saw its last change, every member exists, is ready,
// is not terminating and runs on a node the view shows ready.
func viewUnsettled(v *events.View, except string) string {
	w := &v.Workload
	if !w.Exists {
		return "there is no workload"
	}
	if w.ObservedGeneration < w.Generation {
		return "the workload controller had not seen the last change"
	}
	if n := int32(len(v.Members)); n < w.Replicas {
		return fmt.Sprintf("%d of %d member Pods existed", n, w.Replicas)
	}
	for _, m := range v.Members {
		if m.Name == except {
			continue
		}
		if !m.Ready || m.Terminating || !nodeUp(v, m.NodeName) {
			return "member " + m.Name + " was not ready"
		}
	}
	return ""
}

// missingAboveOnly: the only thing unsettled is members missing, all with ordinals above the
// named member's.
func missingAboveOnly(v *events.View, name, why string) bool {
	if !strings.Contains(why, "member Pods existed") {
		return false
	}
	ord := claimOrdinal("data-" + name)
	present := map[int]bool{}
	for _, m := range v.Members {
		present[claimOrdinal("data-"+m.Name)] = true
	}
	for o := 0; o < int(v.Workload.Replicas); o++ {
		if !present[o] && o < ord {
			return false
		}
	}
	return ord >= 0 && viewUnsettled(&events.View{Workload: events.WorkloadView{Exists: true, Replicas: 0, Generation: v.Workload.Generation,
		ObservedGeneration: v.Workload.ObservedGeneration}, Members: v.Members, Nodes: v.Nodes, NodesSynced: v.NodesSynced}, name) == ""
}

// nodeUp: the view shows the node ready, or cannot tell (its node cache has not synced).
func nodeUp(v *events.View, name string) bool {
	n, ok := v.Nodes[name]
	return !v.NodesSynced || (ok && n.Ready)
}

// judgeStatus derives, by its own reading of the view, what the status must say about the
// disks and about readiness.
func (r *run) judgeStatus(v *events.View, d Decision) {
	r.t.Helper()
	st := d.Status
	var unused, foreign []string
	for _, dk := range v.Disks {
		if dk.FleetUID != v.Fleet.UID {
			foreign = append(foreign, dk.Name)
			continue
		}
		size := int32(0)
		if v.Workload.Exists {
			size = v.Workload.Replicas
		}
		if v.Asleep || v.Fleet.Spec.Hibernate {
			// Asleep, the disks wait for the size the fleet wakes to.
			size = max(size, v.Fleet.Spec.Members)
		}
		if ord := claimOrdinal(dk.Name); ord >= 0 && int32(ord) >= size && !dk.Terminating {
			unused = append(unused, dk.Name)
		}
	}
	var gotUnused, gotForeign []string
	if st.Disks != nil {
		gotUnused, gotForeign = st.Disks.Unused, st.Disks.Foreign
	}
	if fmt.Sprint(gotUnused) != fmt.Sprint(unused) || fmt.Sprint(gotForeign) != fmt.Sprint(foreign) {
		r.fatalf("status: disks unused %v foreign %v; the view shows unused %v foreign %v", gotUnused, gotForeign, unused, foreign)
	}
	ready := int32(0)
	for _, m := range v.Members {
		if m.Ready && !m.Terminating && nodeUp(v, m.NodeName) {
			ready++
		}
	}
	if st.Members.Ready != ready {
		r.fatalf("status: %d members ready; the view shows %d", st.Members.Ready, ready)
	}
	// A condition's transition time is when its status last changed: kept from the published
	// condition of its type while the status is the same, the decision's time otherwise.
	now := metav1.NewTime(v.Now.UTC().Truncate(time.Second))
	for _, c := range st.Conditions {
		want, why := now, "a new status"
		for _, old := range v.Fleet.Status.Conditions {
			if old.Type == c.Type && old.Status == c.Status {
				want, why = old.LastTransitionTime, "the published status is the same"
			}
		}
		if !c.LastTransitionTime.Equal(&want) {
			r.fatalf("status: %s=%s has lastTransitionTime %s, want %s (%s); published %+v", c.Type, c.Status,
				c.LastTransitionTime.UTC().Format(time.RFC3339), want.UTC().Format(time.RFC3339), why, v.Fleet.Status.Conditions)
		}
	}
	for _, c := range st.Conditions {
		if c.Type != v1alpha1.ConditionReady || c.Status != metav1.ConditionTrue {
			continue
		}
		if v.Deleting || v.Workload.Replicas != v.Fleet.Spec.Members || ready != v.Fleet.Spec.Members || int32(len(v.Members)) != ready {
			r.fatalf("status: Ready=True while the view shows %d of %d members ready, %d asked for, deleting=%t",
				ready, len(v.Members), v.Fleet.Spec.Members, v.Deleting)
		}
	}
}

func hasForeign(v *events.View) bool {
	for _, d := range v.Disks {
		if d.FleetUID != v.Fleet.UID {
			return true
		}
	}
	return false
}

// claimOfStatefulSet: the name is data-<fleet>-<ordinal>, the ordinal written as the
// StatefulSet writes it.
func claimOfStatefulSet(name string) bool { return claimOrdinal(name) >= 0 }

// claimOrdinal is the ordinal of a claim the fleet's StatefulSet would make under that name, -1
// for any other name.
func claimOrdinal(name string) int {
	suffix, ok := strings.CutPrefix(name, "data-"+worldName+"-")
	n, err := strconv.Atoi(suffix)
	if !ok || err != nil || n < 0 || strconv.Itoa(n) != suffix {
		return -1
	}
	return n
}

// judgeAction checks an action that passed its premise against the world as it is.
func (r *run) judgeAction(v *events.View, d Decision, a Action) {
	r.t.Helper()
	w := r.w
	switch a.Kind {
	case Apply:
		n, ok := stsReplicas(a)
		if !ok || w.sts == nil || v.Deleting {
			return
		}
		cur := *w.sts.Spec.Replicas
		if n > cur && w.fleet != nil && n != w.fleet.Spec.Members {
			r.fatalf("clause 2: the workload grows from %d to %d while the fleet asks for %d now", cur, n, w.fleet.Spec.Members)
		}
		if n < cur-1 {
			r.fatalf("clause 1: the workload goes from %d to %d members in one write", cur, n)
		}
		if n < cur {
			if why := r.unsettled(""); why != "" {
				r.fatalf("clause 1: scale-in from %d while %s", cur, why)
			}
		}
	case DeletePod:
		p := w.pods[a.Name]
		if a.UID == "" {
			r.fatalf("clause 3: delete of %s without its UID as precondition", a.Name)
		}
		if p == nil || p.UID != a.UID {
			// The API server answers NotFound or Conflict: nothing is deleted.
			return
		}
		if why := r.unsettled(a.Name); why != "" && !r.missingAboveOnly(a.Name) {
			r.fatalf("clause 3: heal of %s while %s", a.Name, why)
		}
		node := w.nodes[p.Spec.NodeName]
		nodeGone := node == nil
		fenced := false
		if node != nil {
			for _, t := range node.Spec.Taints {
				fenced = fenced || t.Key == corev1.TaintNodeOutOfService
			}
		}
		notReadyPastGrace := !podReady(p) && !p.Status.Conditions[0].LastTransitionTime.After(w.now.Add(-worldGrace))
		claimGone := w.claimBroken(p)
		if !nodeGone && !fenced && !(claimGone && notReadyPastGrace) {
			r.fatalf("clause 3: heal of %s (%s), which could come back, or runs on a node nobody fenced (node %s present and not fenced, claim usable or not past grace)", a.Name, a.Reason, p.Spec.NodeName)
		}
		if a.Force && !nodeGone && !fenced {
			r.fatalf("clause 3: forced delete of %s whose node %s is neither gone nor fenced", a.Name, p.Spec.NodeName)
		}
	case StopWorkload:
		if w.fleet == nil || !w.fleet.Spec.Hibernate {
			r.fatalf("clause 1: the workload stopped at once while the fleet does not ask to hibernate (now)")
		}
		if r.kept == nil {
			r.kept = map[string]string{}
		}
		for name, c := range w.pvcs {
			if claimOfStatefulSet(name) && c.Labels[kinds.LabelFleetUID] == string(w.fleet.UID) {
				r.kept[name] = string(c.UID)
			}
		}
	case DeleteDisk:
		c := w.pvcs[a.Name]
		if a.UID == "" {
			r.fatalf("clause 4: disk %s deleted without its UID as precondition", a.Name)
		}
		for _, vd := range v.Disks {
			if vd.Name == a.Name && vd.Terminating {
				r.fatalf("clause 8: disk %s deleted again while terminating", a.Name)
			}
		}
		if c == nil || c.UID != a.UID {
			return
		}
		switch {
		case d.To != v1alpha1.StateDeleting:
			r.fatalf("clause 4: disk %s deleted in %s", a.Name, d.To)
		case r.profile != v1alpha1.ProfilePersistentFleet:
			r.fatalf("clause 4: disk %s deleted for a %s fleet", a.Name, r.profile)
		case c.Labels[kinds.LabelFleetUID] != string(w.fleet.UID):
			r.fatalf("clause 4: disk %s of fleet UID %q deleted by fleet %s", a.Name, c.Labels[kinds.LabelFleetUID], w.fleet.UID)
		case len(w.pods) > 0:
			r.fatalf("clause 4: disk %s deleted while %d member Pods exist", a.Name, len(w.pods))
		case !claimOfStatefulSet(c.Name):
			r.fatalf("clause 4: disk %s is no claim the fleet's StatefulSet made", a.Name)
		}
	}
}

// unsettled says why the world is not settled enough to take a member away (except the one
// named), "" when it is.
func (r *run) unsettled(except string) string {
	w := r.w
	if w.sts == nil {
		return "there is no workload"
	}
	if w.sts.Status.ObservedGeneration < w.sts.Generation {
		return "the workload controller has not seen the last change"
	}
	if n := int32(len(w.pods)); n < *w.sts.Spec.Replicas {
		return fmt.Sprintf("%d of %d member Pods exist", n, *w.sts.Spec.Replicas)
	}
	for _, p := range w.members() {
		if p.Name == except {
			continue
		}
		if !podReady(p) || !w.nodeReady(p.Spec.NodeName) {
			return "member " + p.Name + " is not ready"
		}
	}
	return ""
}

// missingAboveOnly: in the world, every other member is up, and the ones missing all have
// ordinals above the named member's.
func (r *run) missingAboveOnly(name string) bool {
	w := r.w
	ord := ordinalOf(name)
	for i := 0; i < int(*w.sts.Spec.Replicas); i++ {
		if _, ok := w.pods[fmt.Sprintf("%s-%d", worldName, i)]; !ok && i < ord {
			return false
		}
	}
	for _, p := range w.members() {
		if p.Name != name && (!podReady(p) || !w.nodeReady(p.Spec.NodeName)) {
			return false
		}
	}
	return w.sts.Status.ObservedGeneration >= w.sts.Generation
}

// settle stops every fault and checks liveness and idempotence: the fleet reaches its target
// with every member ready (judged from Pods), or is gone when deleted; then a pass, and a pass
// of a restarted operator, write nothing.
func (r *run) settle() {
	r.t.Helper()
	w := r.w
	w.say("faults stop")
	for i := 0; i < 4; i++ {
		name := fmt.Sprintf("n%d", i)
		if n := w.nodes[name]; n == nil {
			w.addNode(name)
		} else if !events.NodeHealth(n).Ready {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(w.now)}}
			n.Spec.Taints = nil
		}
	}
	w.broken = map[string]bool{}
	// A person deletes the other fleet's claim the operator refused to adopt.
	delete(w.pvcs, "data-a-9")
	for _, c := range w.pvcs {
		if c.Status.Phase == corev1.ClaimLost {
			c.Status.Phase = corev1.ClaimBound
		}
	}
	r.lag = false
	for i := 0; i < 300; i++ {
		w.tick()
		w.now = w.now.Add(25 * time.Second)
		r.pass(w.observe())
		if r.done() {
			break
		}
	}
	if !r.done() {
		r.fatalf("clause 10: no convergence after faults stopped: %s", r.shape())
	}
	if w.fleet == nil {
		return
	}
	// A hibernation never loses a disk: every claim it kept is there, under the same UID,
	// whether the fleet sleeps or woke (its members run on them again).
	for name, uid := range r.kept {
		if c := w.pvcs[name]; c == nil || string(c.UID) != uid {
			r.fatalf("hibernation: claim %s (uid %s) kept when the fleet went to sleep is gone: %s", name, uid, r.shape())
		}
	}
	quiet := false
	for i := 0; i < 4 && !quiet; i++ {
		v := events.Normalize(worldNS, worldName, w.observe())
		d := r.m.Step(&v)
		quiet = mutations(d) == ""
		for _, a := range d.Actions {
			_ = w.apply(a)
		}
	}
	v := events.Normalize(worldNS, worldName, w.observe())
	if got := mutations(r.m.Step(&v)); !quiet || got != "" {
		r.fatalf("clause 8: a converged fleet still writes: %s", got)
	}
	if got := mutations(New().Step(&v)); got != "" {
		r.fatalf("clauses 8, 11: a restarted operator writes to a converged fleet: %s", got)
	}
}

func mutations(d Decision) string {
	var out []string
	for _, a := range d.Actions {
		if a.Mutating() {
			out = append(out, a.String())
		}
	}
	return strings.Join(out, "; ")
}

// done: the deleted fleet is gone, and so are its disks (a PersistentFleet's, by its UID), or the live fleet runs its
// target with every member ready and nothing terminating.
func (r *run) done() bool {
	w := r.w
	if w.fleet == nil {
		if r.unheld {
			return true
		}
		for _, c := range w.pvcs {
			if r.profile == v1alpha1.ProfilePersistentFleet && c.Labels[kinds.LabelFleetUID] == "uid-1" && c.Name != "data-a-08" {
				return false
			}
		}
		return true
	}
	if w.fleet.DeletionTimestamp != nil {
		return false
	}
	if w.fleet.Spec.Hibernate {
		return w.sts == nil && len(w.pods) == 0 && w.fleet.Status.State == v1alpha1.StateHibernated
	}
	if w.sts == nil {
		return false
	}
	want := w.fleet.Spec.Members
	if *w.sts.Spec.Replicas != want || int32(len(w.pods)) != want {
		return false
	}
	for _, p := range w.pods {
		if !podReady(p) || !w.nodeReady(p.Spec.NodeName) {
			return false
		}
	}
	return true
}

func (r *run) shape() string {
	w := r.w
	var b strings.Builder
	if w.fleet != nil {
		fmt.Fprintf(&b, "fleet members=%d deleting=%t status=%s blocked=%q; ", w.fleet.Spec.Members, w.fleet.DeletionTimestamp != nil, w.fleet.Status.State, w.fleet.Status.BlockedBy)
	}
	if w.sts != nil {
		fmt.Fprintf(&b, "sts replicas=%d settled=%s; ", *w.sts.Spec.Replicas, w.sts.Annotations[kinds.AnnotationSettled])
	}
	for _, p := range w.members() {
		fmt.Fprintf(&b, "%s(ready=%t node=%s) ", p.Name, podReady(p), p.Spec.NodeName)
	}
	for _, k := range sortedKeys(w.pvcs) {
		c := w.pvcs[k]
		fmt.Fprintf(&b, "claim %s(uid=%s deleting=%t) ", k, c.Labels[kinds.LabelFleetUID], c.DeletionTimestamp != nil)
	}
	return b.String()
}

// sequence runs n ops drawn from d, then stops the faults and settles.
func (r *run) sequence(d draw, n int) {
	r.t.Helper()
	for i := 0; i < n; i++ {
		r.do(pickOp(d), d)
	}
	r.settle()
}

// TestLifecycleContract: random lifecycle sequences (a user who resizes and deletes, nodes that
// go down or away, members that crash, claims lost or foreign, an operator that decides on
// lagging caches and restarts) against judges that read the world, not the machine's facts.
func TestLifecycleContract(t *testing.T) {
	edges := map[string]int{}
	rapid.Check(t, func(rt *rapid.T) {
		profile := rapid.SampledFrom([]v1alpha1.Profile{v1alpha1.ProfilePersistentFleet, v1alpha1.ProfileBucket}).Draw(rt, "profile")
		r := newRun(rt, profile, int32(rapid.IntRange(1, 4).Draw(rt, "members")), edges)
		r.sequence(rapidDraw{rt}, rapid.IntRange(10, 150).Draw(rt, "ops"))
	})
	checkDrawn(t, edges)
}

// drawn is every edge the exported diagram draws.
func drawn() map[string]bool {
	out := map[string]bool{}
	for _, t := range table {
		out[edge(t.from, t.to, t.trigger)] = true
	}
	for _, t := range reentries {
		out[edge(t.from, t.from, t.trigger)] = true
	}
	return out
}

// checkDrawn fails on an edge taken that the diagram does not draw.
func checkDrawn(t *testing.T, taken map[string]int) {
	t.Helper()
	d := drawn()
	for e := range taken {
		if !d[e] {
			t.Errorf("the machine took %q, which the diagram does not draw", e)
		}
	}
}

// script is a scenario: a profile, a size, the ops in order, and the arguments they draw
// (0 when the list runs out: the first node, one member).
type script struct {
	name    string
	profile v1alpha1.Profile
	members int32
	ops     []op
	args    []int
}

func (s script) run(t *testing.T, edges map[string]int) {
	r := newRun(t, s.profile, s.members, edges)
	args := append([]int(nil), s.args...)
	d := queueDraw{&args}
	for _, o := range s.ops {
		r.do(o, d)
	}
	r.settle()
}

func repeat(n int, ops ...op) []op {
	var out []op
	for i := 0; i < n; i++ {
		out = append(out, ops...)
	}
	return out
}

func cat(parts ...[]op) []op {
	var out []op
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestDiagramEdgesAreExactlyTheTakenOnes: scripted scenarios and many random sequences, with
// edge coverage: every edge the diagram draws is taken, and none is taken that it does not draw.
func TestDiagramEdgesAreExactlyTheTakenOnes(t *testing.T) {
	edges := map[string]int{}
	up := repeat(12, opTick, opPass)
	for _, s := range []script{
		// members=4 (args 3, lag 1: none), then members=2 after the window.
		{"provision, grow, shrink, delete", v1alpha1.ProfilePersistentFleet, 2,
			cat(up, []op{opMembers}, up, []op{opTime, opMembers}, up, []op{opDelete}, up), []int{3, 1, 199, 1, 1}},
		{"delete while provisioning", v1alpha1.ProfileBucket, 3, []op{opPass, opTick, opPass, opDelete, opPass}, nil},
		{"a node gone in Steady", v1alpha1.ProfilePersistentFleet, 3, cat(up, []op{opNodeGone}, up), nil},
		// members=2 after the window: the pass starts the scale-in, a-2 goes, then a-0's node.
		{"a node gone while shrinking", v1alpha1.ProfilePersistentFleet, 3,
			cat(up, []op{opTime, opMembers, opPass, opTime, opPass}, repeat(3, opTick), []op{opNodeGone, opPass}, up), []int{199, 1, 1, 199}},
		// members=2 after the window, the scale-in starts, then the user deletes the fleet.
		{"delete while shrinking", v1alpha1.ProfilePersistentFleet, 3,
			cat(up, []op{opTime, opMembers, opPass, opTime, opPass, opTick, opDelete, opPass}, up), []int{199, 1, 1, 199}},
		// members=4, a-3 ready, then a-0's node goes before the growth is recorded.
		{"a node gone while growing", v1alpha1.ProfilePersistentFleet, 3,
			cat(up, []op{opMembers, opPass}, repeat(4, opTick), []op{opNodeGone, opPass}, up), []int{3, 1}},
		{"hibernate, restart asleep, wake", v1alpha1.ProfilePersistentFleet, 3,
			cat(up, []op{opHibernate}, up, []op{opRestart}, up, []op{opHibernate}, up), nil},
		{"delete while hibernated", v1alpha1.ProfilePersistentFleet, 2, cat(up, []op{opHibernate}, up, []op{opDelete}, up), nil},
		{"delete a Bucket fleet while hibernated", v1alpha1.ProfileBucket, 2, cat(up, []op{opHibernate}, up, []op{opDelete}, up), nil},
	} {
		s.run(t, edges)
	}
	for seed := int64(1); seed <= 150; seed++ {
		d := randDraw{rand.New(rand.NewSource(seed))}
		profile := v1alpha1.ProfilePersistentFleet
		if seed%2 == 0 {
			profile = v1alpha1.ProfileBucket
		}
		r := newRun(t, profile, int32(1+d.intn(4, "members")), edges)
		r.sequence(d, 20+d.intn(120, "ops"))
	}
	checkDrawn(t, edges)
	var missing []string
	for e := range drawn() {
		if edges[e] == 0 {
			missing = append(missing, e)
		}
	}
	sort.Strings(missing)
	for _, e := range missing {
		t.Errorf("the diagram draws %q, which no scenario or random sequence took", e)
	}
	if testing.Verbose() {
		var all []string
		for e, n := range edges {
			all = append(all, fmt.Sprintf("%6d  %s", n, e))
		}
		sort.Strings(all)
		t.Logf("edges taken:\n%s", strings.Join(all, "\n"))
	}
}
