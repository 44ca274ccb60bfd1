package contract

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/kinds"
)

// Entry is one recorded version of an object.
type Entry struct {
	Seen
	// Initial: from a recorder's list, so what changed to produce it is unknown.
	Initial bool
}

// Verdict is what Judge found.
type Verdict struct {
	Violations []string
	Checks     int
	// ByClause counts the checks by clause of the contract.
	ByClause map[string]int
	// Explained counts the Pod and claim deletions by what explains them.
	Explained map[string]int
	// TemplateChanges counts writes that changed a StatefulSet's Pod template: the rollouts that
	// may explain Pod deletions.
	TemplateChanges int
}

// Summary counts the checks by clause and the deletions by what explains them.
func (v *Verdict) Summary() string {
	keys := make([]string, 0, len(v.Explained))
	for k := range v.Explained {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, v.Explained[k]))
	}
	if len(parts) == 0 {
		parts = []string{"none"}
	}
	return fmt.Sprintf("checks of clause 1 (scale-in) %d, 2 (growth) %d, 3 (Pod deletion) %d, 4 (claim deletion) %d, %s %d; deletions: %s; template changes %d",
		v.ByClause["1"], v.ByClause["2"], v.ByClause["3"], v.ByClause["4"], drainClause, v.ByClause[drainClause], strings.Join(parts, ", "), v.TemplateChanges)
}

// judging is the state of every recorded object at one resource version, as the history is
// replayed in the order etcd wrote it.
type judging struct {
	Verdict
	e      Entry
	rv     uint64
	fleets map[types.UID]*fleetSeen
	// workloads are the StatefulSets and Deployments, by UID.
	workloads map[types.UID]*workload
	sets      map[types.UID]*appsv1.ReplicaSet
	pods      map[types.UID]*corev1.Pod
	// podSince is the resource version a Pod was first seen at, 0 when it was listed.
	podSince map[types.UID]uint64
	claims   map[types.UID]*corev1.PersistentVolumeClaim
	nodes    map[string]*corev1.Node
	// lostAt is when a member was deleted because its node was lost, by fleet UID and Pod name.
	lostAt map[string]time.Time
	// asked is the request that asked for each Pod's deletion, where the audit log shows it.
	asked map[types.UID]Request
}

type fleetSeen struct {
	last *v1alpha1.CelldFleet
	gone bool
}

// workload is a StatefulSet or a Deployment as the contract sees it.
type workload struct {
	kind, name string
	uid        types.UID
	fleet      types.UID
	replicas   int32
	rolledOut  bool
	status     string
	// template is the Pod template (StatefulSet only), and templateRV the resource version of the
	// last write seen to change it.
	template   *corev1.PodTemplateSpec
	templateRV uint64
}

func workloadOf(o runtime.Object) (*workload, bool) {
	switch x := o.(type) {
	case *appsv1.StatefulSet:
		return &workload{kind: "StatefulSet", name: x.Name, uid: x.UID, fleet: fleetOf(x), replicas: *x.Spec.Replicas,
			rolledOut: RolledOut(x), status: DescribeStatefulSet(x), template: &x.Spec.Template}, true
	case *appsv1.Deployment:
		r := *x.Spec.Replicas
		st := x.Status
		return &workload{kind: "Deployment", name: x.Name, uid: x.UID, fleet: fleetOf(x), replicas: r,
			rolledOut: st.ObservedGeneration >= x.Generation && st.Replicas == r && st.ReadyReplicas == r && st.UpdatedReplicas == r,
			status: fmt.Sprintf("spec.replicas=%d generation=%d status{observedGeneration=%d replicas=%d ready=%d updated=%d}",
				r, x.Generation, st.ObservedGeneration, st.Replicas, st.ReadyReplicas, st.UpdatedReplicas)}, true
	}
	return nil, false
}

// fleetOf is the UID of the fleet that controls an object, by its controller reference, else by
// the fleet UID label.
func fleetOf(m metav1.Object) types.UID {
	if ref := metav1.GetControllerOf(m); ref != nil && ref.Kind == "CelldFleet" {
		return ref.UID
	}
	return types.UID(m.GetLabels()[kinds.LabelFleetUID])
}

// Judge replays a recorded history in resource version order (one etcd: its revisions order
// writes across kinds) and checks every write the contract speaks of against the state just
// before it. requests are the Pod evictions and deletes the API server's audit log recorded (nil
// when there is none): a member a drain evicted is judged by the drain's clause, not as a
// deletion of the operator's.
func Judge(history []Entry, requests []Request) Verdict {
	h := append([]Entry(nil), history...)
	sort.SliceStable(h, func(i, j int) bool { return ResourceVersion(h[i].Meta()) < ResourceVersion(h[j].Meta()) })
	j := &judging{
		asked:   askedFor(h, requests),
		Verdict: Verdict{Explained: map[string]int{}, ByClause: map[string]int{}},
		fleets:  map[types.UID]*fleetSeen{}, workloads: map[types.UID]*workload{}, sets: map[types.UID]*appsv1.ReplicaSet{},
		pods: map[types.UID]*corev1.Pod{}, podSince: map[types.UID]uint64{}, lostAt: map[string]time.Time{}, claims: map[types.UID]*corev1.PersistentVolumeClaim{},
		nodes: map[string]*corev1.Node{},
	}
	for _, e := range h {
		j.e, j.rv = e, ResourceVersion(e.Meta())
		deleted := e.Type == watch.Deleted
		switch o := e.Obj.(type) {
		case *v1alpha1.CelldFleet:
			j.fleets[o.UID] = &fleetSeen{last: o, gone: deleted}
		case *appsv1.StatefulSet, *appsv1.Deployment:
			w, _ := workloadOf(o)
			j.workload(w, deleted)
		case *appsv1.ReplicaSet:
			if deleted {
				delete(j.sets, o.UID)
			} else {
				j.sets[o.UID] = o
			}
		case *corev1.Pod:
			j.pod(o, deleted)
		case *corev1.PersistentVolumeClaim:
			j.claim(o, deleted)
		case *corev1.Node:
			if deleted {
				delete(j.nodes, o.Name)
			} else {
				j.nodes[o.Name] = o
			}
		}
	}
	return j.Verdict
}

func (j *judging) violate(clause, object, format string, args ...any) {
	if clause != drainClause {
		clause = "clause " + clause
	}
	j.Violations = append(j.Violations, fmt.Sprintf("%s: %s at resource version %d (%s): %s",
		clause, object, j.rv, j.e.At.Format("15:04:05.000"), fmt.Sprintf(format, args...)))
}

// check counts one check of the contract and reports a violation when ok is false.
func (j *judging) check(ok bool, clause, object, format string, args ...any) {
	j.Checks++
	j.ByClause[clause]++
	if !ok {
		j.violate(clause, object, format, args...)
	}
}

// fleet is the fleet of that UID as last seen, nil when never seen; deleting when its deletion
// was requested or it is gone.
func (j *judging) fleet(uid types.UID) (fl *v1alpha1.CelldFleet, deleting bool) {
	s := j.fleets[uid]
	if s == nil {
		return nil, false
	}
	return s.last, s.gone || s.last.DeletionTimestamp != nil
}

// requested is the size the fleet asks for, -1 when only the operator knows it (capacity mode
// Auto sizes by recommendation).
func requested(fl *v1alpha1.CelldFleet) int32 {
	if fl == nil || fl.Spec.Capacity.Mode == v1alpha1.CapacityAuto {
		return -1
	}
	return fl.Spec.Members
}

// workload judges a write of a StatefulSet or Deployment: clause 1 for a lowering of
// spec.replicas, clause 2 for a raise (a creation counts as a raise from nothing).
func (j *judging) workload(w *workload, deleted bool) {
	prev := j.workloads[w.uid]
	if deleted {
		delete(j.workloads, w.uid)
		return
	}
	if prev != nil {
		w.templateRV = prev.templateRV
		if w.template != nil && prev.template != nil && !equality.Semantic.DeepEqual(w.template, prev.template) {
			w.templateRV = j.rv
			j.TemplateChanges++
		}
	}
	j.workloads[w.uid] = w
	if j.e.Initial {
		return
	}
	obj := w.kind + " " + w.name
	fl, deleting := j.fleet(w.fleet)
	if fl == nil {
		return // no fleet's workload: the contract does not speak of it
	}
	from := int32(0)
	if prev != nil {
		from = prev.replicas
	} else {
		// A workload created over members that outlived the last one (deleted with propagation
		// Orphan to change its claim template) starts from them.
		for _, p := range j.pods {
			if types.UID(p.Labels[kinds.LabelFleetUID]) == w.fleet && p.DeletionTimestamp == nil {
				from++
			}
		}
	}
	switch {
	case w.replicas < from && deleting:
		// Deleting stops the workload in one write: the fleet is going, members and all.
		j.Checks++
		j.ByClause["1"]++
	case w.replicas < from:
		j.check(from-w.replicas == 1, "1", obj, "spec.replicas %d->%d: lowered by %d in one write; one member per step", from, w.replicas, from-w.replicas)
		status := "created over members that outlived the last one"
		if prev != nil {
			status = prev.status
		}
		j.check(prev != nil && prev.rolledOut, "1", obj, "spec.replicas %d->%d while the previous change had not rolled out: %s", from, w.replicas, status)
		ready, notReady := j.members(w.fleet, "")
		j.check(len(notReady) == 0 && int32(len(ready)) == from, "1", obj,
			"spec.replicas %d->%d while not every member was ready: ready %v, not ready or terminating %v", from, w.replicas, ready, notReady)
		cordoned := j.cordoned(w.fleet)
		j.check(len(cordoned) == 0, "1", obj,
			"spec.replicas %d->%d while members' nodes were cordoned %v: a drain may evict one of them as the scale-in takes another", from, w.replicas, cordoned)
	case w.replicas > from && !deleting:
		if want := requested(fl); want >= 0 {
			j.check(w.replicas == want, "2", obj, "spec.replicas %d->%d while the fleet asked for %d: growth takes one write to the requested size", from, w.replicas, want)
		}
	}
}

// cordoned lists the fleet's members on a cordoned node, as member@node.
func (j *judging) cordoned(fleet types.UID) []string {
	var out []string
	for _, p := range j.pods {
		if types.UID(p.Labels[kinds.LabelFleetUID]) != fleet || p.DeletionTimestamp != nil {
			continue
		}
		if n, ok := j.nodes[p.Spec.NodeName]; ok && n.Spec.Unschedulable {
			out = append(out, p.Name+"@"+n.Name)
		}
	}
	sort.Strings(out)
	return out
}

// members lists the fleet's member Pods, except one, as ready and not (not ready or terminating).
func (j *judging) members(fleet types.UID, except types.UID) (ready, notReady []string) {
	for uid, p := range j.pods {
		if uid == except || types.UID(p.Labels[kinds.LabelFleetUID]) != fleet {
			continue
		}
		if events.PodReady(p) {
			ready = append(ready, p.Name)
		} else {
			notReady = append(notReady, p.Name)
		}
	}
	sort.Strings(ready)
	sort.Strings(notReady)
	return ready, notReady
}

// pod judges the first deletion of a Pod (clause 3): the deletion request, or the Pod gone at once
// as a forced deletion leaves it.
func (j *judging) pod(p *corev1.Pod, deleted bool) {
	prev, known := j.pods[p.UID]
	if !known {
		j.podSince[p.UID] = j.rv
		if j.e.Initial {
			j.podSince[p.UID] = 0
		}
	}
	first := !j.e.Initial && (deleted || p.DeletionTimestamp != nil) && (!known || prev.DeletionTimestamp == nil)
	if first {
		if r, ok := j.asked[p.UID]; ok && r.Eviction {
			j.podEvicted(p, prev, r)
		} else {
			j.podDeleted(p)
		}
		// Gone at once, with no grace period: a forced deletion, which must not start a second
		// copy of a member whose node may be alive.
		if deleted && (p.DeletionGracePeriodSeconds == nil || *p.DeletionGracePeriodSeconds == 0) {
			j.podForced(p)
		}
	}
	if deleted {
		delete(j.pods, p.UID)
		delete(j.podSince, p.UID)
	} else {
		j.pods[p.UID] = p
	}
}

func (j *judging) podDeleted(p *corev1.Pod) {
	fleet := types.UID(p.Labels[kinds.LabelFleetUID])
	if fleet == "" {
		return // not a member of any fleet: the contract does not speak of it
	}
	obj := "Pod " + p.Name + " (" + string(p.UID) + ")"
	why := j.podDeletionReason(p, fleet)
	by := ""
	if r, ok := j.asked[p.UID]; ok {
		by = ", asked by " + r.String()
	}
	j.check(why != "", "3", obj, "deleted with its fleet live, within its workload's size, on a healthy node, and no rollout to explain it%s", by)
	if why == "" {
		return
	}
	j.Explained["Pod: "+why]++
	if why == "node lost" {
		j.lostAt[string(fleet)+"/"+p.Name] = j.e.At
		// The heal of one member that cannot come back: every other member must be ready, except
		// one lost the same way (a node taken away by someone else), whose eviction is the node
		// lifecycle controller's.
		_, notReady := j.members(fleet, p.UID)
		var others []string
		for _, name := range notReady {
			if q := j.podNamed(fleet, name); q == nil || !j.nodeLost(q.Spec.NodeName) {
				others = append(others, name)
			}
		}
		j.check(len(others) == 0, "3", obj, "deleted as its node %s is lost while other members were not ready or terminating: %v; heals go one member at a time", p.Spec.NodeName, others)
	}
}

func (j *judging) podForced(p *corev1.Pod) {
	if types.UID(p.Labels[kinds.LabelFleetUID]) == "" {
		return
	}
	n, ok := j.nodes[p.Spec.NodeName]
	fenced := false
	if ok {
		for _, t := range n.Spec.Taints {
			fenced = fenced || t.Key == corev1.TaintNodeOutOfService
		}
	}
	j.check(p.Spec.NodeName == "" || !ok || fenced, "3", "Pod "+p.Name+" ("+string(p.UID)+")",
		"force-deleted on node %s, which is neither gone nor tainted out-of-service: it may still run the member", p.Spec.NodeName)
}

// podDeletionReason names what explains a member's deletion, empty when nothing does.
func (j *judging) podDeletionReason(p *corev1.Pod, fleet types.UID) string {
	if _, deleting := j.fleet(fleet); deleting {
		return "fleet deleted"
	}
	if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		return "finished, replaced by its controller"
	}
	if ref := metav1.GetControllerOf(p); ref != nil {
		switch ref.Kind {
		case "StatefulSet":
			if s := j.workloads[ref.UID]; s != nil {
				if n, ok := podOrdinal(p.Name, s.name); ok && n >= s.replicas {
					return "scale-down"
				}
				if j.podSince[p.UID] < s.templateRV {
					return "template rollout"
				}
			}
		case "ReplicaSet":
			if rs := j.sets[ref.UID]; rs != nil && rs.Spec.Replicas != nil {
				live := int32(0)
				for _, q := range j.pods {
					if c := metav1.GetControllerOf(q); c != nil && c.UID == ref.UID && q.DeletionTimestamp == nil {
						live++
					}
				}
				if live > *rs.Spec.Replicas {
					return "scale-down"
				}
			}
		}
	}
	if fl, _ := j.fleet(fleet); fl != nil && fl.Spec.Hibernate && j.controllerGone(p) {
		// Hibernation alone stops every member at once: the operator deleted the workload and
		// the garbage collector deletes what it owned.
		return "hibernation"
	}
	if j.nodeLost(p.Spec.NodeName) {
		return "node lost"
	}
	if at, ok := j.lostAt[string(fleet)+"/"+p.Name]; ok && j.e.At.Sub(at) < evictionRace {
		// The taint eviction controller evicts a Pod from a fenced node by name, with no UID
		// precondition: when the member's heal wins that race, the eviction lands on the
		// replacement its StatefulSet has just created, before or after the scheduler gave it
		// a node. Before, no member ran in it. After, the controller's own mark on the Pod
		// says who deleted it; the operator never writes that mark.
		switch {
		case p.Spec.NodeName == "":
			return "unscheduled replacement evicted by name"
		case taintManagerMarked(p):
			return "replacement evicted by name by the taint manager"
		}
	}
	return ""
}

// controllerGone: the workload that controls the Pod (its StatefulSet, or the Deployment of its
// ReplicaSet) is gone, as the garbage collector sees it when it deletes the Pod.
func (j *judging) controllerGone(p *corev1.Pod) bool {
	ref := metav1.GetControllerOf(p)
	if ref == nil {
		return false
	}
	switch ref.Kind {
	case "StatefulSet":
		return j.workloads[ref.UID] == nil
	case "ReplicaSet":
		rs := j.sets[ref.UID]
		if rs == nil {
			return true
		}
		if d := metav1.GetControllerOf(rs); d != nil {
			return j.workloads[d.UID] == nil
		}
	}
	return false
}

// taintManagerMarked: the taint eviction controller's condition, which it writes on the Pod it
// fetched by name just before it deletes that name.
func taintManagerMarked(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == "DeletionByTaintManager" {
			return true
		}
	}
	return false
}

// evictionRace bounds how long after a member's heal the taint eviction controller's eviction by
// name may land on the replacement.
const evictionRace = 10 * time.Second

// nodeLost: the node is gone, NotReady, or tainted as unreachable or not ready.
func (j *judging) nodeLost(name string) bool {
	if name == "" {
		return false
	}
	n, ok := j.nodes[name]
	return !ok || !NodeHealthy(n)
}

func (j *judging) podNamed(fleet types.UID, name string) *corev1.Pod {
	for _, p := range j.pods {
		if p.Name == name && types.UID(p.Labels[kinds.LabelFleetUID]) == fleet {
			return p
		}
	}
	return nil
}

func podOrdinal(pod, set string) (int32, bool) {
	rest, ok := strings.CutPrefix(pod, set+"-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 32)
	return int32(n), err == nil && n >= 0
}

// claim judges the first deletion of a claim (clause 4): only a deleted PersistentFleet's own
// claims, once no member Pod of it exists.
func (j *judging) claim(c *corev1.PersistentVolumeClaim, deleted bool) {
	prev, known := j.claims[c.UID]
	if known && !deleted && !j.e.Initial {
		// A claim's storage request only grows (clause 4).
		was, now := prev.Spec.Resources.Requests[corev1.ResourceStorage], c.Spec.Resources.Requests[corev1.ResourceStorage]
		j.check(now.Cmp(was) >= 0, "4", "PersistentVolumeClaim "+c.Name+" ("+string(c.UID)+")", "storage request lowered %s->%s: a claim only grows", was.String(), now.String())
	}
	first := !j.e.Initial && (deleted || c.DeletionTimestamp != nil) && (!known || prev.DeletionTimestamp == nil)
	if deleted {
		delete(j.claims, c.UID)
	} else {
		j.claims[c.UID] = c
	}
	if !first {
		return
	}
	obj := "PersistentVolumeClaim " + c.Name + " (" + string(c.UID) + ")"
	uid := types.UID(c.Labels[kinds.LabelFleetUID])
	s := j.fleets[uid]
	j.check(uid != "" && s != nil, "4", obj, "deleted, and it is no fleet's own claim (fleet UID label %q)", uid)
	if uid == "" || s == nil {
		return
	}
	fl, deleting := j.fleet(uid)
	j.check(deleting, "4", obj, "deleted while its fleet %s was live", fl.Name)
	j.check(fl.Spec.Profile == v1alpha1.ProfilePersistentFleet, "4", obj, "deleted, and its fleet %s is a %s fleet, not a PersistentFleet", fl.Name, fl.Spec.Profile)
	var left []string
	for _, p := range j.pods {
		if types.UID(p.Labels[kinds.LabelFleetUID]) == uid {
			left = append(left, p.Name)
		}
	}
	sort.Strings(left)
	j.check(len(left) == 0, "4", obj, "deleted while member Pods of its fleet %s still existed: %v", fl.Name, left)
	if len(left) == 0 && deleting {
		j.Explained["claim: fleet deleted"]++
	}
}

// ResourceVersion is an object's resource version as a number: the local control plane has one
// etcd, whose revision every resource version is, so it orders writes across kinds.
func ResourceVersion(m metav1.Object) uint64 {
	rv, _ := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
	return rv
}

// RolledOut: every replica of the requested size exists, is ready and on the current template;
// for a staged rollout held at its partition (the current and update revisions differ), every
// replica from the partition up is on it, by the status's count.
func RolledOut(s *appsv1.StatefulSet) bool {
	r := *s.Spec.Replicas
	updated := s.Status.UpdatedReplicas == r
	if ru := s.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil && s.Status.CurrentRevision != s.Status.UpdateRevision {
		updated = updated || s.Status.UpdatedReplicas >= r-min(*ru.Partition, r)
	}
	return s.Status.ObservedGeneration == s.Generation && s.Status.Replicas == r &&
		s.Status.ReadyReplicas == r && updated
}

// DescribeStatefulSet is what a violation says of a StatefulSet's rollout.
func DescribeStatefulSet(s *appsv1.StatefulSet) string {
	return fmt.Sprintf("spec.replicas=%d generation=%d status{observedGeneration=%d replicas=%d ready=%d updated=%d}",
		*s.Spec.Replicas, s.Generation, s.Status.ObservedGeneration, s.Status.Replicas, s.Status.ReadyReplicas, s.Status.UpdatedReplicas)
}

// NodeHealthy: Ready, and tainted neither unreachable nor not-ready.
func NodeHealthy(n *corev1.Node) bool {
	for _, taint := range n.Spec.Taints {
		if taint.Key == corev1.TaintNodeUnreachable || taint.Key == corev1.TaintNodeNotReady {
			return false
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
