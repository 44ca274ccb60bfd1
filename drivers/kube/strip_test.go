package kube

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	"sigs.k8s.io/randfill"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/drivers/sim"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/machine"
	"github.com/celld/celld-operator/proptest/harness"
)

// TestStrippedCachesDecideAlike: what the caches drop of Pods and Nodes (strip.go) is never
// read by a decision. On the objects random lifecycle sequences leave in the simulator, with every
// field the simulator leaves empty filled at random (container statuses, images, addresses,
// tolerations, managedFields...), the informers holding the objects whole and the informers
// holding them stripped observe the same view, decide the same actions, and measure the same
// utilization. A decision that reads a dropped field sees a random value on one side and nothing
// on the other.
func TestStrippedCachesDecideAlike(t *testing.T) {
	compared, measured := 0, 0
	fills := map[uint64]*randfill.Filler{}
	eachWorld(t, func(w *harness.World, seed uint64) {
		if fills[seed] == nil {
			fills[seed] = noiseFiller(int64(seed))
		}
		c, m := compareStripped(t, w, fills[seed])
		compared, measured = compared+c, measured+m
	})
	if compared < 100 || measured < 50 {
		t.Fatalf("only %d fleets compared, %d with a utilization measured", compared, measured)
	}
}

func compareStripped(t *testing.T, w *harness.World, fill *randfill.Filler) (compared, measured int) {
	t.Helper()
	var whole, stripped []any
	var fleets []*v1alpha1.CelldFleet
	var samples []metricsv1beta1.PodMetrics
	for _, ev := range w.C.Resync() {
		if ev.Object == nil || ev.Kind == sim.Gone {
			continue
		}
		switch o := ev.Object.(type) {
		case *corev1.Pod:
			// The simulator's members request nothing; the capacity sampler reads requests.
			o = o.DeepCopy()
			for i := range o.Spec.Containers {
				if o.Spec.Containers[i].Resources.Requests == nil {
					o.Spec.Containers[i].Resources.Requests = corev1.ResourceList{}
				}
				o.Spec.Containers[i].Resources.Requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(100*(i+1)), resource.DecimalSI)
			}
			n := noisy(t, fill, o)
			s, _ := stripPod(n.DeepCopy())
			whole, stripped = append(whole, n), append(stripped, s)
			sample := metricsv1beta1.PodMetrics{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name}}
			for _, c := range n.Spec.Containers {
				sample.Containers = append(sample.Containers, metricsv1beta1.ContainerMetrics{Name: c.Name, Usage: corev1.ResourceList{
					corev1.ResourceCPU: *resource.NewMilliQuantity(int64(50+len(o.Name)), resource.DecimalSI)}})
			}
			samples = append(samples, sample)
			continue
		case *corev1.Node:
			n := noisy(t, fill, o)
			s, _ := stripNode(n.DeepCopy())
			whole, stripped = append(whole, n), append(stripped, s)
			continue
		case *v1alpha1.CelldFleet:
			fleets = append(fleets, o)
		}
		whole, stripped = append(whole, ev.Object), append(stripped, ev.Object)
	}
	a, b := testInformers(t, whole...), testInformers(t, stripped...)
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	for _, f := range fleets {
		oa, errA := a.Observe(events.KeyOf(f), now, nil)
		ob, errB := b.Observe(events.KeyOf(f), now, nil)
		if errA != nil || errB != nil {
			t.Fatalf("%s/%s: observe: %v, %v", f.Namespace, f.Name, errA, errB)
		}
		va, vb := events.Normalize(f.Namespace, f.Name, oa), events.Normalize(f.Namespace, f.Name, ob)
		if !reflect.DeepEqual(va, vb) {
			t.Fatalf("%s/%s: the view differs once Pods and Nodes are stripped:\nwhole    %+v\nstripped %+v", f.Namespace, f.Name, va, vb)
		}
		da, db := machine.New().Step(&va), machine.New().Step(&vb)
		if !reflect.DeepEqual(da, db) {
			t.Fatalf("%s/%s: the decision differs once Pods and Nodes are stripped:\nwhole    %v\nstripped %v", f.Namespace, f.Name, da.Actions, db.Actions)
		}
		ua, okA := Utilization(oa.Pods, samples, now)
		ub, okB := Utilization(ob.Pods, samples, now)
		if okA != okB || !reflect.DeepEqual(ua, ub) {
			t.Fatalf("%s/%s: the utilization differs once Pods are stripped: %+v (%t) against %+v (%t)", f.Namespace, f.Name, ua, okA, ub, okB)
		}
		if okA {
			measured++
		}
	}
	return len(fleets), measured
}

// noiseFiller fills any API object at random, in values the API server could hold.
func noiseFiller(seed int64) *randfill.Filler {
	return randfill.NewWithSeed(seed).NilChance(0.3).NumElements(1, 2).MaxDepth(6).Funcs(
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewMilliQuantity(c.Int63n(100000)+1, resource.DecimalSI)
		},
		func(tm *metav1.Time, c randfill.Continue) {
			*tm = metav1.NewTime(time.Unix(1.7e9+c.Int63n(1e8), 0).UTC())
		},
		func(tm *metav1.MicroTime, c randfill.Continue) {
			*tm = metav1.NewMicroTime(time.Unix(1.7e9+c.Int63n(1e8), 0).UTC())
		},
		func(v *intstr.IntOrString, c randfill.Continue) {
			*v = intstr.FromInt32(c.Int31n(65535) + 1)
		},
	)
}

// noisy is obj with every field it leaves empty filled at random: obj's fields win, maps merge,
// and a list obj sets replaces the random one. Its metadata is obj's but for random
// managedFields.
func noisy[T any, P interface {
	*T
	metav1.Object
}](t *testing.T, fill *randfill.Filler, obj P) P {
	t.Helper()
	var random T
	fill.Fill(&random)
	var r, o map[string]any
	for _, x := range []struct {
		v   any
		out *map[string]any
	}{{&random, &r}, {obj, &o}} {
		b, err := json.Marshal(x.v)
		if err != nil {
			t.Fatalf("%T: %v", x.v, err)
		}
		if err := json.Unmarshal(b, x.out); err != nil {
			t.Fatal(err)
		}
	}
	managed := P(&random).GetManagedFields()
	delete(r, "metadata")
	delete(r, "kind")
	delete(r, "apiVersion")
	merge(r, o)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	out := P(new(T))
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%T: %v\n%s", obj, err, b)
	}
	out.SetManagedFields(managed)
	return out
}

// merge writes src over dst: maps merge key by key, a list keeps src's length and merges its
// elements with dst's at the same index, anything else src holds replaces dst's.
func merge(dst, src map[string]any) {
	for k, v := range src {
		dst[k] = mergeValue(dst[k], v)
	}
}

func mergeValue(dst, src any) any {
	switch s := src.(type) {
	case map[string]any:
		if d, ok := dst.(map[string]any); ok {
			merge(d, s)
			return d
		}
	case []any:
		if d, ok := dst.([]any); ok {
			out := make([]any, len(s))
			for i := range s {
				if i < len(d) {
					out[i] = mergeValue(d[i], s[i])
				} else {
					out[i] = s[i]
				}
			}
			return out
		}
	}
	return src
}

// TestStripKeepsWhatIsRead pins the fields the transforms keep, so that a keep lost shows here
// by name rather than only as a differing decision.
func TestStripKeepsWhatIsRead(t *testing.T) {
	ready := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(time.Unix(1.7e9, 0)),
		Reason: "ContainersNotReady", Message: "long words"}
	evicted := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(time.Unix(1.7e9, 0)),
		Reason: events.DisruptionEviction, Message: "Eviction API: evicting"}
	unplaced := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/3 nodes are available: 1 node(s) were unschedulable"}
	pod := noisy(t, noiseFiller(7), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "a-0", Namespace: "team", Labels: map[string]string{"app": "a"}},
		Spec: corev1.PodSpec{NodeName: "n1",
			Volumes: []corev1.Volume{{Name: kinds.DataVolume, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-a-0"}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			Containers: []corev1.Container{{Name: "celld", Image: "celld:1", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{ready, evicted, unplaced}},
	})
	got, _ := stripPod(pod.DeepCopy())
	p := got.(*corev1.Pod)
	want := &corev1.Pod{ObjectMeta: *pod.ObjectMeta.DeepCopy(), Spec: corev1.PodSpec{NodeName: "n1",
		Volumes: []corev1.Volume{{Name: kinds.DataVolume, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-a-0"}}}},
		Containers: []corev1.Container{{Name: "celld", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: ready.LastTransitionTime},
			{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, LastTransitionTime: evicted.LastTransitionTime, Reason: events.DisruptionEviction},
			unplaced}}}
	want.ManagedFields = nil
	if !reflect.DeepEqual(p, want) {
		t.Errorf("stripped Pod\n%s\nwant\n%s", dump(p), dump(want))
	}

	taint := corev1.Taint{Key: "node.kubernetes.io/out-of-service", Effect: corev1.TaintEffectNoExecute}
	cond := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}
	node := noisy(t, noiseFiller(8), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{taint}}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{cond}}})
	got, _ = stripNode(node.DeepCopy())
	n := got.(*corev1.Node)
	if n.ManagedFields != nil || !reflect.DeepEqual(n.Labels, node.Labels) || !reflect.DeepEqual(n.Spec, node.Spec) ||
		!reflect.DeepEqual(n.Status, corev1.NodeStatus{Conditions: node.Status.Conditions}) {
		t.Errorf("stripped Node\n%s\nfrom\n%s", dump(n), dump(node))
	}
	// CacheForm, what the benchmark measures the caches on, is the informers' transforms.
	if got := CacheForm(pod.DeepCopy()); !reflect.DeepEqual(got, want) {
		t.Errorf("CacheForm of a Pod\n%s\nwant\n%s", dump(got), dump(want))
	}
	if got := CacheForm(node.DeepCopy()); !reflect.DeepEqual(got, n) {
		t.Errorf("CacheForm of a Node\n%s\nwant\n%s", dump(got), dump(n))
	}
	mine := metav1.ManagedFieldsEntry{Manager: kinds.FieldManager, Operation: metav1.ManagedFieldsOperationUpdate,
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}
	res := &v1alpha1.CelldReservation{ObjectMeta: metav1.ObjectMeta{Name: "r",
		ManagedFields: []metav1.ManagedFieldsEntry{mine, {Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status"}}}}
	if got := CacheForm(res.DeepCopy()).(*v1alpha1.CelldReservation); len(got.ManagedFields) != 1 || got.ManagedFields[0].Manager != kinds.FieldManager {
		t.Errorf("CacheForm of a reservation dropped the entries that tell who wrote its spec: %+v", got.ManagedFields)
	}
	// Anything else passes with its managedFields dropped.
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}}}
	for _, strip := range []func(any) (any, error){stripPod, stripNode} {
		if got, _ := strip(claim.DeepCopy()); got.(*corev1.PersistentVolumeClaim).ManagedFields != nil || got.(*corev1.PersistentVolumeClaim).Name != "c" {
			t.Errorf("a claim through a Pod or Node transform: %+v", got)
		}
	}
}

func dump(v any) string {
	b, _ := json.MarshalIndent(v, "", " ")
	s := string(b)
	if len(s) > 4000 {
		s = s[:4000] + fmt.Sprintf("... (%d bytes)", len(s))
	}
	return strings.TrimSpace(s)
}
