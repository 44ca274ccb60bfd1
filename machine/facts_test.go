package machine

import (
	"testing"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
)

// missingOnlyAbove: every member the workload's size calls for and the view lacks has an
// ordinal above the given member's.
func TestMissingOnlyAbove(t *testing.T) {
	for _, tc := range []struct {
		name     string
		replicas int32
		present  []int
		member   int
		want     bool
	}{
		{"none missing, the lowest member", 3, []int{0, 1, 2}, 0, true},
		{"none missing, the highest member", 3, []int{0, 1, 2}, 2, true},
		{"the one above missing", 3, []int{0, 1}, 1, true},
		{"the lowest member, all above it missing", 3, []int{0}, 0, true},
		{"one below missing", 3, []int{1, 2}, 2, false},
		{"the one just below missing", 3, []int{0, 2}, 2, false},
		{"a member above the size; what the size does not call for is not missing", 3, []int{0, 1, 2, 4}, 4, true},
		{"a Pod with no ordinal", 3, []int{0, 1, 2, -1}, -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &events.View{Workload: events.WorkloadView{Exists: true, Replicas: tc.replicas}}
			var m *events.Member
			for _, ord := range tc.present {
				v.Members = append(v.Members, events.Member{Name: "a-x", Ordinal: ord})
			}
			for i := range v.Members {
				if v.Members[i].Ordinal == tc.member {
					m = &v.Members[i]
				}
			}
			if got := missingOnlyAbove(v, m); got != tc.want {
				t.Errorf("replicas %d, members %v, member %d: got %t, want %t", tc.replicas, tc.present, tc.member, got, tc.want)
			}
		})
	}
}

// deletionInFlight: a deleted fleet's workload was stopped, or is gone while members or the
// fleet's own disks remain; a disk of another fleet is not this one's deletion.
func TestDeletionInFlight(t *testing.T) {
	fleet := fleet(v1alpha1.ProfilePersistentFleet)
	for _, tc := range []struct {
		name string
		v    events.View
		want bool
	}{
		{"workload stopped", events.View{Workload: events.WorkloadView{Exists: true, Replicas: 0}}, true},
		{"workload running", events.View{Workload: events.WorkloadView{Exists: true, Replicas: 3}}, false},
		{"workload gone, a member left", events.View{Members: []events.Member{{Name: "a-0"}}}, true},
		{"workload gone, one of its disks left", events.View{Disks: []events.Disk{{Name: "data-a-0", FleetUID: fleet.UID}}}, true},
		{"workload gone, only another fleet's disk", events.View{Disks: []events.Disk{{Name: "data-a-0", FleetUID: "other"}}}, false},
		{"nothing left", events.View{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.v.Fleet = fleet
			if got := deletionInFlight(&tc.v); got != tc.want {
				t.Errorf("got %t, want %t", got, tc.want)
			}
		})
	}
}
