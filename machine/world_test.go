package machine

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"reflect"
	"sort"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/reservation"
)

// world is a small cluster, written for the machine's own tests: a StatefulSet controller with
// OrderedReady Pods, kubelets, nodes that fail, claims, and a user. It shares no decision code
// with the machine: the judges in lifecycle_test.go read what it records. The operator may decide
// on an old observation (a lagging cache); its actions then go through the premise check against
// the world as it is, as a driver's fresh reads would.
type world struct {
	now   time.Time
	uid   int
	fleet *v1alpha1.CelldFleet
	res   *v1alpha1.CelldReservation
	sts   *appsv1.StatefulSet
	owned map[string]any
	pods  map[string]*corev1.Pod
	nodes map[string]*corev1.Node
	pvcs  map[string]*corev1.PersistentVolumeClaim
	// broken marks Pods whose container never gets ready (not the node's fault).
	broken map[string]bool
	// past are the observations the operator may still be deciding on, newest last.
	past []*events.Observation
	// log is what happened, for a failure's story.
	log []string
}

const (
	worldNS    = "ns"
	worldName  = "a"
	worldGrace = time.Minute
)

func newWorld(profile v1alpha1.Profile, members int32) *world {
	w := &world{uid: 100, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), owned: map[string]any{}, pods: map[string]*corev1.Pod{},
		nodes: map[string]*corev1.Node{}, pvcs: map[string]*corev1.PersistentVolumeClaim{}, broken: map[string]bool{}}
	f := fleet(profile)
	f.Namespace, f.Name, f.Generation = worldNS, worldName, 1
	f.CreationTimestamp = metav1.NewTime(w.now)
	f.Spec.Members = members
	f.Spec.Workload = v1alpha1.WorkloadOrderedStatefulSet
	f.Spec.Healing.UnreachableGracePeriod = &metav1.Duration{Duration: worldGrace}
	f.Spec.Capacity.ScaleInStabilization = &metav1.Duration{Duration: 2 * time.Minute}
	w.fleet = f
	for i := 0; i < 4; i++ {
		w.addNode(fmt.Sprintf("n%d", i))
	}
	return w
}

func (w *world) say(format string, args ...any) {
	w.log = append(w.log, w.now.Format("15:04:05")+" "+fmt.Sprintf(format, args...))
}

func (w *world) newUID() types.UID { w.uid++; return types.UID(fmt.Sprintf("uid-%d", w.uid)) }

func (w *world) addNode(name string) {
	w.nodes[name] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: w.newUID(), CreationTimestamp: metav1.NewTime(w.now)},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(w.now)}}}}
}

func (w *world) nodeReady(name string) bool {
	n := w.nodes[name]
	return n != nil && events.NodeHealth(n).Ready
}

// observe is what the caches hold now; it is kept, so a later operator pass may decide on it.
func (w *world) observe() *events.Observation {
	o := &events.Observation{Now: w.now, NodesSynced: true, StorageClassKnown: false, Nodes: map[string]*corev1.Node{}}
	if w.fleet != nil {
		o.Fleet = w.fleet.DeepCopy()
	}
	if w.res != nil {
		o.Reservations = []*v1alpha1.CelldReservation{w.res.DeepCopy()}
	}
	if w.sts != nil {
		o.StatefulSet = w.sts.DeepCopy()
	}
	for _, k := range sortedKeys(w.owned) {
		if x, ok := w.owned[k].(kinds.Object); ok && !kinds.IsWorkload(x) {
			o.Owned = append(o.Owned, x.DeepCopyObject().(kinds.Object))
		}
	}
	for _, k := range sortedKeys(w.pods) {
		o.Pods = append(o.Pods, w.pods[k].DeepCopy())
	}
	for _, k := range sortedKeys(w.pvcs) {
		o.PVCs = append(o.PVCs, w.pvcs[k].DeepCopy())
	}
	for k, n := range w.nodes {
		o.Nodes[k] = n.DeepCopy()
	}
	// Every change to an object gives it a new resourceVersion, as the API server does: here, a
	// hash of its content.
	for _, obj := range observedObjects(o) {
		obj.SetResourceVersion("")
		b, err := json.Marshal(obj)
		if err != nil {
			panic(err)
		}
		h := fnv.New64a()
		h.Write(b)
		obj.SetResourceVersion(strconv.FormatUint(h.Sum64(), 36))
	}
	w.past = append(w.past, o)
	if len(w.past) > 4 {
		w.past = w.past[1:]
	}
	return o
}

// observedObjects lists the observation's objects (the copies, never the world's).
func observedObjects(o *events.Observation) []metav1.Object {
	var out []metav1.Object
	if o.Fleet != nil {
		out = append(out, o.Fleet)
	}
	for _, r := range o.Reservations {
		out = append(out, r)
	}
	if o.StatefulSet != nil {
		out = append(out, o.StatefulSet)
	}
	for _, x := range o.Owned {
		out = append(out, x)
	}
	for _, x := range o.Pods {
		out = append(out, x)
	}
	for _, x := range o.PVCs {
		out = append(out, x)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// fresh is what a driver reads from the API server to confirm a premise.
func (w *world) fresh(p *Premise) Fresh {
	fr := Fresh{Pods: map[string]*corev1.Pod{}}
	if w.fleet != nil {
		fr.FleetGeneration = w.fleet.Generation
	}
	if w.sts != nil {
		fr.WorkloadExists, fr.WorkloadGeneration = true, w.sts.Generation
		fr.WorkloadRolledOut = events.WorkloadOf(w.sts).RolledOut()
	}
	fr.MemberNodes = map[string]*corev1.Node{}
	// Every Pod of the fleet, terminating or not, as the drivers count them for NoMembers.
	fr.Members = len(w.pods)
	for name, p := range w.pods {
		fr.Pods[name] = p.DeepCopy()
		if n := p.Spec.NodeName; n != "" {
			fr.MemberNodes[n] = nil
			if node := w.nodes[n]; node != nil {
				fr.MemberNodes[n] = node.DeepCopy()
			}
		}
	}
	if p != nil && p.Node != "" {
		if n := w.nodes[p.Node]; n != nil {
			fr.Node = n.DeepCopy()
		}
	}
	return fr
}

func ordinalOf(name string) int {
	n, err := strconv.Atoi(name[len(worldName)+1:])
	if err != nil {
		return -1
	}
	return n
}

// tick runs the controllers and kubelets once: the StatefulSet controller takes one step
// (OrderedReady), kubelets start and finish Pods on healthy nodes, the claim protection lets a
// deleted claim go once no Pod uses it, and the garbage collector removes a deleted fleet's
// objects.
func (w *world) tick() {
	w.now = w.now.Add(5 * time.Second)
	if w.fleet == nil {
		w.sts, w.owned = nil, map[string]any{}
		for k := range w.pods {
			delete(w.pods, k)
		}
		return
	}
	// The scheduler, and kubelets.
	for _, k := range sortedKeys(w.pods) {
		p := w.pods[k]
		if p.Spec.NodeName == "" {
			if p.DeletionTimestamp != nil {
				delete(w.pods, k)
				continue
			}
			p.Spec.NodeName = w.readyNode()
		}
		if p.DeletionTimestamp != nil && w.nodes[p.Spec.NodeName] != nil && events.NodeHealth(w.nodes[p.Spec.NodeName]).Fenced {
			// The Pod collector lets a fenced node's terminating Pods go (non-graceful shutdown).
			delete(w.pods, k)
			continue
		}
		if !w.nodeReady(p.Spec.NodeName) {
			continue
		}
		if p.DeletionTimestamp != nil {
			delete(w.pods, k)
			continue
		}
		if !podReady(p) && !w.broken[k] && !w.claimBroken(p) {
			setPodReady(p, true, w.now)
		}
	}
	// Claim protection.
	for _, k := range sortedKeys(w.pvcs) {
		c := w.pvcs[k]
		if c.DeletionTimestamp == nil {
			continue
		}
		used := false
		for _, p := range w.pods {
			if claimOf(p) == k {
				used = true
			}
		}
		if !used {
			delete(w.pvcs, k)
		}
	}
	w.statefulSetController()
}

func (w *world) claimBroken(p *corev1.Pod) bool {
	c := claimOf(p)
	if c == "" {
		return false
	}
	pvc := w.pvcs[c]
	return pvc == nil || pvc.Status.Phase == corev1.ClaimLost
}

func claimOf(p *corev1.Pod) string {
	for _, v := range p.Spec.Volumes {
		if v.Name == kinds.DataVolume && v.PersistentVolumeClaim != nil {
			return v.PersistentVolumeClaim.ClaimName
		}
	}
	return ""
}

func podReady(p *corev1.Pod) bool { return events.PodReady(p) }

func setPodReady(p *corev1.Pod, ready bool, now time.Time) {
	s := corev1.ConditionFalse
	if ready {
		s = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: s, LastTransitionTime: metav1.NewTime(now)}}
	p.ResourceVersion = strconv.Itoa(int(now.Unix()))
}

func (w *world) statefulSetController() {
	s := w.sts
	if s == nil {
		return
	}
	replicas := int(*s.Spec.Replicas)
	var mine []*corev1.Pod
	for _, k := range sortedKeys(w.pods) {
		mine = append(mine, w.pods[k])
	}
	sort.Slice(mine, func(i, j int) bool { return ordinalOf(mine[i].Name) < ordinalOf(mine[j].Name) })
	stepped := false
	// Scale down: the highest ordinal first, once every Pod below is ready.
	for i := len(mine) - 1; i >= 0 && !stepped; i-- {
		p := mine[i]
		if ordinalOf(p.Name) >= replicas && p.DeletionTimestamp == nil {
			now := metav1.NewTime(w.now)
			p.DeletionTimestamp = &now
			stepped = true
		}
	}
	// Scale up: the lowest missing ordinal, once every Pod below it is ready.
	for i := 0; i < replicas && !stepped; i++ {
		name := fmt.Sprintf("%s-%d", worldName, i)
		p := w.pods[name]
		if p == nil {
			w.createPod(name)
			stepped = true
			break
		}
		if !podReady(p) {
			break
		}
	}
	ready, updated, count := int32(0), int32(0), int32(0)
	for _, p := range w.pods {
		count++
		updated++
		if podReady(p) {
			ready++
		}
	}
	s.Status = appsv1.StatefulSetStatus{ObservedGeneration: s.Generation, Replicas: count, ReadyReplicas: ready, UpdatedReplicas: updated,
		CurrentRevision: "r1", UpdateRevision: "r1"}
}

// readyNode is the ready node with the fewest members (the default spread), "" when none is
// ready (the Pod stays pending).
func (w *world) readyNode() string {
	best, load := "", 0
	for _, n := range sortedKeys(w.nodes) {
		if !w.nodeReady(n) {
			continue
		}
		l := 0
		for _, p := range w.pods {
			if p.Spec.NodeName == n {
				l++
			}
		}
		if best == "" || l < load {
			best, load = n, l
		}
	}
	return best
}

func (w *world) createPod(name string) {
	node := w.readyNode()
	tmpl := w.sts.Spec.Template
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: worldNS, UID: w.newUID(), Labels: map[string]string{},
		CreationTimestamp: metav1.NewTime(w.now), ResourceVersion: strconv.Itoa(w.uid)}}
	for k, v := range tmpl.Labels {
		p.Labels[k] = v
	}
	p.Labels[appsv1.StatefulSetRevisionLabel] = "r1"
	p.Spec.NodeName = node
	if len(w.sts.Spec.VolumeClaimTemplates) > 0 {
		claim := kinds.DataVolume + "-" + name
		p.Spec.Volumes = []corev1.Volume{{Name: kinds.DataVolume, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
		if _, ok := w.pvcs[claim]; !ok {
			t := w.sts.Spec.VolumeClaimTemplates[0]
			w.pvcs[claim] = &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: worldNS, UID: w.newUID(),
				Labels: t.Labels, ResourceVersion: strconv.Itoa(w.uid)}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
		}
	}
	setPodReady(p, false, w.now)
	w.pods[name] = p
}

// apply carries out one action whose premise the caller confirmed.
func (w *world) apply(a Action) error {
	f := w.fleet
	if f == nil {
		return nil
	}
	switch a.Kind {
	case Apply:
		switch x := a.Object.(type) {
		case *appsv1.StatefulSet:
			if w.sts == nil {
				w.sts = x.DeepCopy()
				w.sts.UID, w.sts.Generation = w.newUID(), 1
			} else if !reflect.DeepEqual(w.sts.Spec, x.Spec) || !reflect.DeepEqual(w.sts.Annotations, x.Annotations) {
				if !reflect.DeepEqual(w.sts.Spec, x.Spec) {
					w.sts.Generation++
					// The controller has not seen this spec yet.
					w.sts.Status.ObservedGeneration = w.sts.Generation - 1
				}
				w.sts.Spec, w.sts.Annotations, w.sts.Labels = *x.Spec.DeepCopy(), x.Annotations, x.Labels
			}
		case *appsv1.Deployment:
			panic("the world runs StatefulSets only")
		default:
			w.owned[a.Ref.String()] = x
		}
	case BindReservation:
		if w.res == nil {
			w.res = a.Object.(*v1alpha1.CelldReservation).DeepCopy()
			w.res.CreationTimestamp = metav1.NewTime(w.now)
		}
	case AppendHistory:
		if w.res != nil {
			w.res.Status.CapacityHistory = reservation.AppendAll(w.res.Status.CapacityHistory, a.Decisions)
		}
	case AddFinalizer:
		f.Finalizers = []string{v1alpha1.FleetFinalizer}
		f.ResourceVersion = strconv.Itoa(len(w.log) + w.uid)
	case RemoveFinalizer:
		f.Finalizers = nil
		if f.DeletionTimestamp != nil {
			w.fleet = nil
			w.say("fleet gone")
		}
	case DeletePod:
		p := w.pods[a.Name]
		if p == nil || p.UID != a.UID {
			return fmt.Errorf("pod %s: precondition failed", a.Name)
		}
		if a.Force {
			delete(w.pods, a.Name)
		} else if p.DeletionTimestamp == nil {
			now := metav1.NewTime(w.now)
			p.DeletionTimestamp = &now
		}
	case StopWorkload:
		if w.sts == nil || w.sts.UID != a.UID {
			return fmt.Errorf("workload %s: precondition failed", a.Name)
		}
		// Background propagation: the garbage collector deletes every member at once; the
		// claims have no owner.
		w.sts = nil
		now := metav1.NewTime(w.now)
		for _, p := range w.pods {
			if p.DeletionTimestamp == nil {
				p.DeletionTimestamp = &now
			}
		}
	case DeleteDisk:
		c := w.pvcs[a.Name]
		if c == nil || c.UID != a.UID {
			return fmt.Errorf("claim %s: precondition failed", a.Name)
		}
		now := metav1.NewTime(w.now)
		c.DeletionTimestamp = &now
	case PublishStatus:
		f.Status = *a.Status.DeepCopy()
	}
	return nil
}

// member names the fleet's Pods, sorted.
func (w *world) members() []*corev1.Pod {
	var out []*corev1.Pod
	for _, k := range sortedKeys(w.pods) {
		out = append(out, w.pods[k])
	}
	return out
}
