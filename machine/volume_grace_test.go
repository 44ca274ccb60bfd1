package machine

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
)

// TestMissingClaimWaitsForTheGracePeriod: a claim missing from the view may only lag its Pod (the
// two are separate watches), so its member is replaced for a lost volume only once it has been
// not ready for the grace period, and then it is.
func TestMissingClaimWaitsForTheGracePeriod(t *testing.T) {
	for _, tc := range []struct {
		name     string
		notReady time.Duration
		heals    int
	}{
		{"within the grace period", worldGrace / 2, 0},
		{"past the grace period", 2 * worldGrace, 1},
		{"a second before the grace period ends", worldGrace - time.Second, 0},
		{"when the grace period ends", worldGrace, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, v := steadyView(t)
			v.Members = append([]events.Member(nil), v.Members...)
			m := &v.Members[1]
			m.Ready, m.NotReadySince = false, v.Now.Add(-tc.notReady)
			var disks []events.Disk
			for _, d := range v.Disks {
				if d.Name != m.ClaimName {
					disks = append(disks, d)
				}
			}
			if len(disks) != len(v.Disks)-1 {
				t.Fatalf("member %s has no claim %s among %d disks", m.Name, m.ClaimName, len(v.Disks))
			}
			v.Disks = disks
			d := New().Step(&v)
			heals := 0
			for _, a := range d.Actions {
				if a.Kind == DeletePod && a.Reason == string(HealVolumeLost) && a.Name == m.Name {
					heals++
				}
			}
			if heals != tc.heals || (d.To == v1alpha1.StateHealing) != (tc.heals == 1) {
				t.Fatalf("%d heals for a lost volume, state %s; want %d", heals, d.To, tc.heals)
			}
		})
	}
}

// TestBrokenRolloutWaitsForTheGracePeriod: a member not ready on a revision the workload no
// longer rolls out is replaced once it has been not ready for the grace period, from its last
// instant on; before that the fleet is stepped again when the period ends.
func TestBrokenRolloutWaitsForTheGracePeriod(t *testing.T) {
	for _, tc := range []struct {
		name     string
		notReady time.Duration
		heals    int
		requeue  time.Duration
		member   int
		// partition holds the members below it on the current revision (a staged rollout).
		partition int32
		current   string
	}{
		{"half the grace period", worldGrace / 2, 0, worldGrace / 2, 1, 0, "old-hash"},
		{"a second before it ends", worldGrace - time.Second, 0, time.Second, 1, 0, "old-hash"},
		{"when it ends", worldGrace, 1, 0, 1, 0, "old-hash"},
		{"past it", 2 * worldGrace, 1, 0, 1, 0, "old-hash"},
		{"the lowest member, within it", worldGrace / 2, 0, worldGrace / 2, 0, 0, "old-hash"},
		{"the lowest member, past it", 2 * worldGrace, 1, 0, 0, 0, "old-hash"},
		// A held rollout: a member below the partition on the current revision comes back on it,
		// so replacing it cures nothing (and, were it slower to recover than the grace period,
		// would replace it forever); the one at the partition is the rollout's to update.
		{"below a held partition, past it", 2 * worldGrace, 0, 0, 0, 1, "old-hash"},
		{"just below a held partition, past it", 2 * worldGrace, 0, 0, 1, 2, "old-hash"},
		{"at a held partition, past it", 2 * worldGrace, 1, 0, 1, 1, "old-hash"},
		// Below the partition on a revision that is not the current one (a broken canary
		// reverted): it comes back on the current revision, so it is replaced.
		{"below a held partition, off the current revision", 2 * worldGrace, 1, 0, 0, 1, "new-hash"},
		{"below a held partition, off the current revision, within it", worldGrace / 2, 0, worldGrace / 2, 0, 1, "third-hash"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, v := steadyView(t)
			v.Members = append([]events.Member(nil), v.Members...)
			v.Workload.UpdateRevision = "new-hash"
			v.Workload.Partition, v.Workload.CurrentRevision = tc.partition, tc.current
			for i := range v.Members {
				v.Members[i].Revision = "new-hash"
			}
			// The lowest member too: ordinal 0 is a member like any other.
			m := &v.Members[tc.member]
			m.Ready, m.Revision, m.NotReadySince = false, "old-hash", v.Now.Add(-tc.notReady)
			d := New().Step(&v)
			heals := 0
			for _, a := range d.Actions {
				if a.Kind == DeletePod && a.Reason == string(HealBrokenRollout) && a.Name == m.Name {
					heals++
				}
			}
			requeue := requeueAfter(d)
			if heals != tc.heals || requeue != tc.requeue {
				t.Fatalf("%d heals for a broken rollout, requeue after %s; want %d, %s (%s)", heals, requeue, tc.heals, tc.requeue, d.Actions)
			}
		})
	}
}

// A fleet still provisioning heals a member of a broken rollout too (an ordered StatefulSet would
// wait on it forever), once the others are ready; a fleet held for a missing service account
// changes nothing.
func TestProvisioningHealsABrokenRollout(t *testing.T) {
	for _, held := range []bool{false, true} {
		_, v := steadyView(t)
		v.Members = append([]events.Member(nil), v.Members...)
		v.Workload.Settled = -1 // never settled: provisioning
		v.Workload.UpdateRevision = "new-hash"
		for i := range v.Members {
			v.Members[i].Revision = "new-hash"
		}
		m := &v.Members[2]
		m.Ready, m.Revision, m.NotReadySince = false, "old-hash", v.Now.Add(-2*worldGrace)
		if held {
			v.ServiceAccountMissing = true
		}
		d := New().Step(&v)
		heals := 0
		for _, a := range d.Actions {
			if a.Kind == DeletePod && a.Name == m.Name {
				heals++
			}
		}
		if want := map[bool]int{false: 1, true: 0}[held]; heals != want {
			t.Errorf("provisioning, held %t: %d heals of %s, want %d (%s)", held, heals, m.Name, want, d.Actions)
		}
	}
}

// TestStuckBelowAHeldPartitionAsksForApproval: a member not ready on the current template below
// a held rollout's partition is not replaced (it would come back the same), and the status asks
// the person for what ends it: approving the rollout, with the revision to approve.
func TestStuckBelowAHeldPartitionAsksForApproval(t *testing.T) {
	_, v := steadyView(t)
	v.Members = append([]events.Member(nil), v.Members...)
	f := v.Fleet.DeepCopy()
	f.Spec.Rollout = &v1alpha1.RolloutSpec{Canary: 1}
	v.Fleet = f
	v.Workload.CurrentRevision, v.Workload.UpdateRevision, v.Workload.Partition = "old-hash", "new-hash", 2
	for i := range v.Members {
		v.Members[i].Revision = "old-hash"
	}
	m := &v.Members[0]
	m.Ready, m.NotReadySince = false, v.Now.Add(-2*worldGrace)
	d := New().Step(&v)
	for _, a := range d.Actions {
		if a.Kind == DeletePod {
			t.Fatalf("a member held on the current template was replaced: %s", d.Actions)
		}
	}
	var deg metav1.Condition
	for _, c := range d.Status.Conditions {
		if c.Type == v1alpha1.ConditionDegraded {
			deg = c
		}
	}
	want := "kubectl celld rollout approve " + v.Name + " (annotation " + v1alpha1.AnnotationRolloutApproved + "=new-hash)"
	if deg.Reason != ReasonMemberStuck || !strings.Contains(deg.Message, "member a-0") || !strings.Contains(deg.Message, want) {
		t.Errorf("Degraded %s: %q; want MemberStuck naming a-0 and saying %q", deg.Reason, deg.Message, want)
	}
}
