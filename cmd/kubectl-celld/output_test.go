package main

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"

	celldfake "github.com/celld/celld-operator/api/generated/clientset/versioned/fake"
	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
)

// world is a fleet of three members as the API server would show it: one ready on a zoned node
// with its disk bound, one not ready with its disk pending, one being deleted whose disk is gone;
// a Pod of another fleet of the same name; and the fleet's reservation with two decisions.
func world() clients {
	const ns = "team"
	t0 := metav1.NewTime(time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC))
	fl := &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: ns, UID: "fleet-uid", Generation: 4,
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec:   v1alpha1.CelldFleetSpec{Members: 3, Profile: v1alpha1.ProfilePersistentFleet, Image: "celld:1"},
		Status: v1alpha1.CelldFleetStatus{State: "Steady", ObservedGeneration: 4}}
	member := func(name string, ready bool, claim string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, CreationTimestamp: t0,
			Labels: map[string]string{kinds.LabelFleetUID: "fleet-uid", "controller-revision-hash": "alpha-5d8"}},
			Spec: corev1.PodSpec{NodeName: "node-" + name[len(name)-1:],
				Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}}}
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
		return p
	}
	p0, p1, p2 := member("alpha-0", true, "data-alpha-0"), member("alpha-1", false, "data-alpha-1"), member("alpha-2", true, "data-alpha-2")
	p2.DeletionTimestamp = &t0
	stranger := member("alpha-9", true, "data-alpha-9")
	stranger.Labels[kinds.LabelFleetUID] = "another-uid"
	node0 := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-0", Labels: map[string]string{corev1.LabelTopologyZone: "zone-a"}}}
	node1 := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	claim := func(name string, phase corev1.PersistentVolumeClaimPhase) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Status: corev1.PersistentVolumeClaimStatus{Phase: phase}}
	}
	res := &v1alpha1.CelldReservation{ObjectMeta: metav1.ObjectMeta{Name: "bucket-abc", Namespace: ns},
		Spec: v1alpha1.CelldReservationSpec{FleetUID: types.UID("fleet-uid")},
		Status: v1alpha1.CelldReservationStatus{CapacityHistory: []v1alpha1.CapacityDecision{
			{Time: t0, Kind: "Grow", From: 2, To: 3, Source: "spec"},
			{Time: metav1.NewTime(t0.Add(time.Minute)), Kind: "ScaleIn", From: 4, To: 3, Source: "spec"},
		}}}
	return clients{
		kube:  kubefake.NewSimpleClientset(p0, p1, p2, stranger, node0, node1, claim("data-alpha-0", corev1.ClaimBound), claim("data-alpha-1", corev1.ClaimPending)),
		celld: celldfake.NewSimpleClientset(fl, res),
	}
}

// TestStatusAsData: -o json carries every fact of the table, joined the same way, and -o yaml is
// the same document.
func TestStatusAsData(t *testing.T) {
	r, err := read(context.Background(), world(), "team", "alpha")
	if err != nil {
		t.Fatal(err)
	}
	var js, ys bytes.Buffer
	if err := write(&js, "json", statusDocOf(r)); err != nil {
		t.Fatal(err)
	}
	if err := write(&ys, "yaml", statusDocOf(r)); err != nil {
		t.Fatal(err)
	}
	var doc, fromYAML map[string]any
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatalf("-o json is not JSON: %v\n%s", err, js.String())
	}
	if err := yaml.Unmarshal(ys.Bytes(), &fromYAML); err != nil {
		t.Fatalf("-o yaml is not YAML: %v\n%s", err, ys.String())
	}
	if !reflect.DeepEqual(doc, fromYAML) {
		t.Errorf("-o yaml differs from -o json:\n%s\n%s", ys.String(), js.String())
	}
	if doc["kind"] != "FleetStatus" || doc["apiVersion"] != docAPIVersion {
		t.Errorf("kind %v, apiVersion %v", doc["kind"], doc["apiVersion"])
	}
	fl := doc["fleet"].(map[string]any)
	meta := fl["metadata"].(map[string]any)
	if fl["kind"] != "CelldFleet" || fl["apiVersion"] != "celld.io/v1alpha1" || meta["name"] != "alpha" || meta["managedFields"] != nil {
		t.Errorf("the fleet is not shown as kubectl get -o json shows it: kind %v, apiVersion %v, name %v, managedFields %v",
			fl["kind"], fl["apiVersion"], meta["name"], meta["managedFields"])
	}
	if st := fl["status"].(map[string]any); st["state"] != "Steady" {
		t.Errorf("fleet state %v, want Steady", st["state"])
	}

	var got struct {
		Members []memberDoc `json:"members"`
		Res     *struct {
			Metadata struct{ Name string } `json:"metadata"`
			Status   struct {
				CapacityHistory []v1alpha1.CapacityDecision `json:"capacityHistory"`
			} `json:"status"`
		} `json:"reservation"`
	}
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		pod, node, zone string
		ready, deleting bool
		disk, phase     string
	}{
		{"alpha-0", "node-0", "zone-a", true, false, "data-alpha-0", "Bound"},
		{"alpha-1", "node-1", "", false, false, "data-alpha-1", "Pending"},
		{"alpha-2", "node-2", "", false, true, "data-alpha-2", "Missing"}, // Ready, but leaving: not counted
	}
	if len(got.Members) != len(want) {
		t.Fatalf("%d members, want %d (the other fleet's Pod is not one): %+v", len(got.Members), len(want), got.Members)
	}
	for i, w := range want {
		m := got.Members[i]
		if m.Pod != w.pod || m.Node != w.node || m.Zone != w.zone || m.Ready != w.ready || m.Deleting != w.deleting ||
			m.Revision != "alpha-5d8" || len(m.Disks) != 1 || m.Disks[0].Claim != w.disk || m.Disks[0].Phase != w.phase {
			t.Errorf("member %d: %+v, want %+v", i, m, w)
		}
	}
	if got.Res == nil || got.Res.Metadata.Name != "bucket-abc" || len(got.Res.Status.CapacityHistory) != 2 {
		t.Errorf("reservation %+v, want bucket-abc with its 2 decisions", got.Res)
	}
}

// TestHistoryAsData: every decision, oldest first, and an empty list (not null) for a fleet with
// no reservation.
func TestHistoryAsData(t *testing.T) {
	cl := world()
	r, err := read(context.Background(), cl, "team", "alpha")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := write(&out, "json", historyDocOf(r)); err != nil {
		t.Fatal(err)
	}
	var doc historyDoc
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Kind != "FleetHistory" || doc.Namespace != "team" || doc.Fleet != "alpha" || doc.Reservation != "bucket-abc" ||
		len(doc.Decisions) != 2 || doc.Decisions[0].Kind != "Grow" || doc.Decisions[1].Kind != "ScaleIn" {
		t.Errorf("history document: %s", out.String())
	}

	r.reservation = nil
	out.Reset()
	if err := write(&out, "json", historyDocOf(r)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"decisions": []`) || !strings.Contains(out.String(), `"reservation": ""`) {
		t.Errorf("a fleet with no reservation: %s", out.String())
	}
}

// TestOutputRefusedBeforeReading: a misspelt -o is a usage error (exit status 2) that names the
// flag and the values it takes, before any cluster is asked.
func TestOutputRefusedBeforeReading(t *testing.T) {
	for _, cmd := range []string{"status", "history"} {
		var out, errOut bytes.Buffer
		root := newRoot(&out, &errOut, time.Now)
		root.SetArgs([]string{cmd, "alpha", "-o", "jsn", "--server", "https://127.0.0.1:1"})
		err := root.Execute()
		if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), `--output "jsn": want json or yaml`) {
			t.Errorf("%s -o jsn: %v (exit %d); want a usage error naming --output and its values", cmd, err, exitCode(err))
		}
	}
	if _, err := parseOutput("yaml"); err != nil {
		t.Errorf("-o yaml refused: %v", err)
	}
}

// TestStatusPrintsDiskSizes: kubectl celld status shows each claim's requested and actual size,
// what holds a resize, and the claims kept larger than the spec.
func TestStatusPrintsDiskSizes(t *testing.T) {
	var b strings.Builder
	printDisks(&b, &v1alpha1.DiskAudit{Size: "256Mi", Larger: []string{"data-a-2"}, Claims: []v1alpha1.ClaimSize{
		{Claim: "data-a-0", Member: "a-0", Requested: "256Mi", Capacity: "256Mi"},
		{Claim: "data-a-1", Member: "a-1", Requested: "256Mi", Capacity: "64Mi", Resize: "FileSystemResizePending", Message: "waiting for the node"},
		{Claim: "data-a-2", Member: "a-2", Requested: "1Gi", Capacity: "1Gi"},
	}})
	out := b.String()
	for _, want := range []string{"spec.storage.size 256Mi", "data-a-1  a-1     256Mi      64Mi      FileSystemResizePending  waiting for the node",
		"kept as they are: data-a-2"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	printDisks(&b, &v1alpha1.DiskAudit{Unused: []string{"data-a-3"}})
	if b.Len() != 0 {
		t.Errorf("a fleet without claim sizes prints a disks table:\n%s", b.String())
	}
}

// TestStatusShowsMaintenance: the person running a drain sees which member it evicted, which one
// no node takes, and which node is cordoned.
func TestStatusShowsMaintenance(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	fl := &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: "team"},
		Status: v1alpha1.CelldFleetStatus{BlockedBy: "member alpha-1 waits for node node-1, which is cordoned"}}
	pod := func(name, node string, conds ...corev1.PodCondition) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Conditions: conds}}
	}
	evicted := pod("alpha-0", "node-0", corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI"})
	evicted.DeletionTimestamp = &metav1.Time{Time: t0}
	gone := pod("alpha-3", "node-0", corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "DeletionByPodGC"})
	gone.DeletionTimestamp = &metav1.Time{Time: t0}
	r := &report{fleet: fl, pods: []corev1.Pod{
		evicted,
		pod("alpha-1", "", corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}),
		pod("alpha-2", "node-1", corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}),
		gone,
	}, nodes: map[string]*corev1.Node{
		"node-0": {ObjectMeta: metav1.ObjectMeta{Name: "node-0", Labels: map[string]string{corev1.LabelTopologyZone: "zone-a"}}, Spec: corev1.NodeSpec{Unschedulable: true}},
		"node-1": {ObjectMeta: metav1.ObjectMeta{Name: "node-1"}},
	}}
	var b strings.Builder
	printStatus(&b, r, t0, 0)
	out := b.String()
	for _, want := range []string{
		"Blocked by:   member alpha-1 waits for node node-1",
		"alpha-0  node-0  zone-a (cordoned)  evicted",
		"alpha-1  -       -                  unschedulable",
		"alpha-2  node-1  -                  true",
		"alpha-3  node-0  zone-a (cordoned)  terminating",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
}
