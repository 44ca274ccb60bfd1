package events

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
)

// TestNormalizeFingerprints: Normalize leaves the view with the fingerprint of all it holds, the
// last field set included; the clock alone changes nothing, and any input of a decision does.
func TestNormalizeFingerprints(t *testing.T) {
	observe := func(edit func(*Observation)) View {
		f := &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "u1", ResourceVersion: "7", Generation: 2},
			Spec:   v1alpha1.CelldFleetSpec{Profile: v1alpha1.ProfilePersistentFleet, Bucket: v1alpha1.BucketSpec{Name: "b"}},
			Status: v1alpha1.CelldFleetStatus{Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "MembersNotReady", Message: "the fleet is converging"}}}}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a-0", ResourceVersion: "11", Labels: map[string]string{kinds.LabelFleetUID: "u1"}},
			Spec: corev1.PodSpec{NodeName: "n1"}}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
		o := &Observation{Now: t0, Fleet: f, Pods: []*corev1.Pod{pod}, Nodes: map[string]*corev1.Node{"n1": node}, NodesSynced: true}
		if edit != nil {
			edit(o)
		}
		return Normalize("ns", "a", o)
	}
	base := observe(nil)
	if base.Fingerprint == 0 {
		t.Fatal("Normalize left the fingerprint unset: every step would walk the whole view again")
	}
	if fp := fingerprint(&base); fp != base.Fingerprint {
		t.Fatalf("Normalize's fingerprint %x is not that of the view it returned (%x): it was taken before the view was complete", base.Fingerprint, fp)
	}
	if later := observe(func(o *Observation) { o.Now = t0.Add(time.Hour) }); later.Fingerprint != base.Fingerprint {
		t.Errorf("an hour later, nothing else changed: fingerprint %x, want %x", later.Fingerprint, base.Fingerprint)
	}
	for name, edit := range map[string]func(*Observation){
		"the fleet's resourceVersion":             func(o *Observation) { o.Fleet.ResourceVersion = "8" },
		"a status overlaid, same resourceVersion": func(o *Observation) { o.Fleet.Status.Members.Current = 2 },
		"a condition": func(o *Observation) {
			o.Fleet.Status.Conditions = append(o.Fleet.Status.Conditions, metav1.Condition{Type: "Degraded"})
		},
		"a condition's status":    func(o *Observation) { o.Fleet.Status.Conditions[0].Status = metav1.ConditionTrue },
		"a condition's message":   func(o *Observation) { o.Fleet.Status.Conditions[0].Message = "waiting for member a-2" },
		"the next action":         func(o *Observation) { o.Fleet.Status.NextAction = "set the workload to 2 members" },
		"a recommendation":        func(o *Observation) { n := int32(0); o.Fleet.Status.RecommendedMembers = &n },
		"a recommendation of one": func(o *Observation) { n := int32(1); o.Fleet.Status.RecommendedMembers = &n },
		"an unused disk":          func(o *Observation) { o.Fleet.Status.Disks = &v1alpha1.DiskAudit{Unused: []string{"data-a-3"}} },
		"a claim's size in the status": func(o *Observation) {
			o.Fleet.Status.Disks = &v1alpha1.DiskAudit{Claims: []v1alpha1.ClaimSize{{Claim: "data-a-0", Capacity: "1Gi"}}}
		},
		"a claim larger than the spec": func(o *Observation) { o.Fleet.Status.Disks = &v1alpha1.DiskAudit{Larger: []string{"data-a-0"}} },
		"a class that forbids expansion": func(o *Observation) {
			o.StorageClassKnown, o.StorageClass = true, &storagev1.StorageClass{}
		},
		"a member's resourceVersion":   func(o *Observation) { o.Pods[0].ResourceVersion = "12" },
		"its node NotReady":            func(o *Observation) { o.Nodes["n1"].Status.Conditions[0].Status = corev1.ConditionFalse },
		"a priority class missing":     func(o *Observation) { o.PriorityClassMissing = true },
		"a service account missing":    func(o *Observation) { o.ServiceAccountMissing = true },
		"an object under its name":     func(o *Observation) { o.Unowned = []string{"Service/a"} },
		"a refusal of this generation": func(o *Observation) { o.Refused = &Refusal{Generation: 2, Object: "StatefulSet/a", Message: "no"} },
		"the node cache synced or not": func(o *Observation) { o.NodesSynced = false },
		"its node cordoned":            func(o *Observation) { o.Nodes["n1"].Spec.Unschedulable = true },
	} {
		v := observe(edit)
		if v.Fingerprint == base.Fingerprint {
			t.Errorf("%s: the fingerprint did not change", name)
		}
		if fp := fingerprint(&v); fp != v.Fingerprint {
			t.Errorf("%s: Normalize's fingerprint %x, the view's %x", name, v.Fingerprint, fp)
		}
	}
	hand := base
	hand.Fingerprint = 0
	if got := hand.Fingerprinted(); got != base.Fingerprint {
		t.Errorf("a view without its fingerprint computes it: %x, want %x", got, base.Fingerprint)
	}
}

// TestFingerprintHasTheCordonOfADisksNode: a member waiting for its disk's node has no node of its
// own, so the cordon of the node its disk is on is what tells its view apart: the uncordon must
// decide again.
func TestFingerprintHasTheCordonOfADisksNode(t *testing.T) {
	observe := func(cordoned bool) View {
		f := &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "u1", ResourceVersion: "7"},
			Spec: v1alpha1.CelldFleetSpec{Profile: v1alpha1.ProfilePersistentFleet, Bucket: v1alpha1.BucketSpec{Name: "b"}}}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a-0", ResourceVersion: "11", Labels: map[string]string{kinds.LabelFleetUID: "u1"}}}
		claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-a-0", ResourceVersion: "5",
			Labels: map[string]string{kinds.LabelFleetUID: "u1"}, Annotations: map[string]string{AnnotationSelectedNode: "n1"}}}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "3"}, Spec: corev1.NodeSpec{Unschedulable: cordoned}}
		return Normalize("ns", "a", &Observation{Now: t0, Fleet: f, Pods: []*corev1.Pod{pod}, PVCs: []*corev1.PersistentVolumeClaim{claim},
			Nodes: map[string]*corev1.Node{"n1": node}, NodesSynced: true})
	}
	if a, b := observe(true), observe(false); a.Fingerprint == b.Fingerprint {
		t.Errorf("the node of a waiting member's disk cordoned and uncordoned: same fingerprint %x", a.Fingerprint)
	}
}
