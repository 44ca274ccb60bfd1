package machine_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/machine"
)

// A fleet being deleted whose StatefulSet is at zero replicas waits on the StatefulSet
// controller, which removes a member that is not ready only when it is the lowest such one. With
// a member not ready above another, the fleet names the member that is never removed, the one
// that blocks it and the person's step; it deletes no Pod itself (Pods are deleted only in
// Healing). Where the controller can go on by itself, nothing is said.
func TestDeletionBlockedByOrderedScaleDown(t *testing.T) {
	base := convergedFleet(t, v1alpha1.ProfilePersistentFleet)
	deleting := func(v *events.View) {
		v.Deleting = true
		v.Fleet.DeletionTimestamp = &metav1.Time{Time: v.Now}
		v.Workload.Replicas = 0
	}
	notReady := func(v *events.View, ords ...int) {
		for _, o := range ords {
			for i := range v.Members {
				if v.Members[i].Ordinal == o {
					v.Members[i].Ready, v.Members[i].NodeName = false, ""
				}
			}
		}
	}
	cases := []struct {
		name    string
		breaks  func(v *events.View)
		message string // "" when the deletion is not blocked
	}{
		{
			name:    "the two highest members not ready",
			breaks:  func(v *events.View) { notReady(v, 1, 2) },
			message: "will not remove member a-2: it is not ready, and it removes a member that is not ready only when it is the lowest one, but member a-1 below it",
		},
		{
			// The controller removes a-2 first, then stops at a-1: said now, so one step frees it.
			name:    "a ready member on top is removed first; the block is below it",
			breaks:  func(v *events.View) { notReady(v, 0, 1) },
			message: "will not remove member a-1: it is not ready, and it removes a member that is not ready only when it is the lowest one, but member a-0 below it",
		},
		{
			name: "the top member gone; the lowest and the next not ready",
			breaks: func(v *events.View) {
				v.Members = v.Members[:2]
				notReady(v, 0, 1)
			},
			message: "kubectl delete pod a-1 -n " + base.Namespace + " (a graceful delete is enough: it is on no node)",
		},
		{
			name:   "only the lowest member not ready: the controller removes it in turn",
			breaks: func(v *events.View) { notReady(v, 0) },
		},
		{
			name: "the lower member not ready is already terminating: it goes, then the other is the lowest",
			breaks: func(v *events.View) {
				notReady(v, 1, 2)
				v.Members[1].Terminating = true
			},
		},
		{
			name:   "the workload not yet at zero replicas",
			breaks: func(v *events.View) { notReady(v, 1, 2); v.Workload.Replicas = 3 },
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := copyView(base)
			deleting(&v)
			c.breaks(&v)
			d := machine.New().Step(&v)
			if d.To != v1alpha1.StateDeleting {
				t.Fatalf("state %s, want Deleting", d.To)
			}
			for _, a := range d.Actions {
				if a.Kind == machine.DeletePod {
					t.Errorf("the operator deletes a Pod while deleting: %s", a)
				}
			}
			deg := conditionOf(d.Status, v1alpha1.ConditionDegraded)
			blocked := deg.Status == metav1.ConditionTrue && deg.Reason == machine.ReasonDeletionBlocked
			if c.message == "" {
				if blocked {
					t.Errorf("Degraded=%s %s: %s; the controller can go on by itself", deg.Status, deg.Reason, deg.Message)
				}
				return
			}
			if !blocked || !strings.Contains(deg.Message, c.message) {
				t.Errorf("Degraded=%s %s: %s\nwant %s containing %q", deg.Status, deg.Reason, deg.Message, machine.ReasonDeletionBlocked, c.message)
			}
			if d.Status.BlockedBy != deg.Message {
				t.Errorf("blockedBy %q, want the condition's message", d.Status.BlockedBy)
			}
			if p := conditionOf(d.Status, v1alpha1.ConditionProgressing); p.Status != metav1.ConditionFalse || p.Reason != machine.ReasonDeletionBlocked {
				t.Errorf("Progressing=%s %s, want False %s", p.Status, p.Reason, machine.ReasonDeletionBlocked)
			}
			if !strings.Contains(deg.Message, "kubectl delete pod ") {
				t.Errorf("no step for a person in %q", deg.Message)
			}
		})
	}
}

// A step on a cache that has not seen its deletes yet plans them again: the deletes go out again
// (the driver sends none for a claim already going), but no disk is named by a second Event once
// the first was recorded (Advance); a disk no earlier Event named is, and so are all of them when
// the Event that named them was not recorded.
func TestDiskNamedOnce(t *testing.T) {
	v := convergedFleet(t, v1alpha1.ProfilePersistentFleet)
	v.Deleting = true
	v.Fleet.DeletionTimestamp = &metav1.Time{Time: v.Now}
	v.Workload.Exists, v.Workload.Replicas = false, 0
	v.Members = nil
	m := machine.New()
	named := func(d machine.Decision) (names []string, deletes int) {
		for _, a := range d.Actions {
			switch {
			case a.Kind == machine.DeleteDisk:
				deletes++
			case a.Kind == machine.RecordEvent && a.Reason == "DiskDeleted":
				for _, disk := range v.Disks {
					if strings.Contains(a.Message, disk.Name) {
						names = append(names, disk.Name)
					}
				}
			}
		}
		return names, deletes
	}
	d := m.Step(&v)
	if names, deletes := named(d); len(names) != 3 || deletes != 3 {
		t.Fatalf("first step: named %v, %d deletes; want 3 of each", names, deletes)
	}
	// Its first action failed (the Event): nothing was named.
	m.Advance(nil, v.Now)
	d = m.Step(&v)
	if names, deletes := named(d); len(names) != 3 || deletes != 3 {
		t.Fatalf("after the Event failed: named %v, %d deletes; want 3 of each again", names, deletes)
	}
	m.Advance(d.Actions, v.Now)
	d = m.Step(&v)
	if names, deletes := named(d); len(names) != 0 || deletes != 3 {
		t.Errorf("the same view again: named %v, %d deletes; want none named, the 3 deletes again", names, deletes)
	}
	m.Advance(d.Actions, v.Now)
	w := copyView(v)
	extra := w.Disks[0]
	extra.Name, extra.UID, extra.Ordinal = kinds.ClaimName(w.Fleet.Name, 3), "uid-extra", 3
	w.Disks = append(w.Disks, extra)
	v = w
	if names, deletes := named(m.Step(&w)); len(names) != 1 || names[0] != extra.Name || deletes != 4 {
		t.Errorf("a disk no step named yet: named %v, %d deletes; want only %s, 4 deletes", names, deletes, extra.Name)
	}
}

// A deleted fleet's disks are announced by one Event per step, ahead of the deletes it names:
// every disk deleted is named, none is named twice in a step, and a disk already going is not
// deleted or named again.
func TestDiskDeletionsAreOneEventPerStep(t *testing.T) {
	base := convergedFleet(t, v1alpha1.ProfilePersistentFleet)
	v := copyView(base)
	v.Deleting = true
	v.Fleet.DeletionTimestamp = &metav1.Time{Time: v.Now}
	v.Workload.Exists, v.Workload.Replicas = false, 0
	v.Members = nil
	if len(v.Disks) != 3 {
		t.Fatalf("the converged fleet has %d disks, want 3", len(v.Disks))
	}
	for _, going := range []int{-1, 1} {
		v := copyView(v)
		if going >= 0 {
			v.Disks[going].Terminating = true
		}
		d := machine.New().Step(&v)
		var deleted, announced []string
		firstDelete, event := -1, -1
		for i, a := range d.Actions {
			switch {
			case a.Kind == machine.DeleteDisk:
				deleted = append(deleted, a.Name)
				if p := a.Premise; p == nil || !p.NoMembers || p.DiskOf != v.Fleet.UID || p.DiskUID != a.UID || a.UID == "" {
					t.Errorf("delete of %s: premise %+v; want no members, the claim's UID %q and the fleet's %q", a.Name, p, a.UID, v.Fleet.UID)
				}
				if firstDelete < 0 {
					firstDelete = i
				}
			case a.Kind == machine.RecordEvent && a.Reason == "DiskDeleted":
				if event >= 0 {
					t.Fatalf("two DiskDeleted Events in one step: %v", d.Actions)
				}
				event = i
				for _, disk := range v.Disks {
					if strings.Contains(a.Message, disk.Name) {
						announced = append(announced, disk.Name)
					}
				}
			}
		}
		want := len(v.Disks)
		if going >= 0 {
			want--
		}
		if len(deleted) != want || event < 0 || event > firstDelete || strings.Join(announced, ",") != strings.Join(deleted, ",") {
			t.Errorf("disk %d going: deleted %v, Event #%d (first delete #%d) names %v; want %d deleted, all named by one Event ahead of them",
				going, deleted, event, firstDelete, announced, want)
		}
	}
}
