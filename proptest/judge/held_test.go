package judge_test

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/drivers/sim"
	"github.com/celld/celld-operator/proptest/judge"
)

// TestHeldByNameTaken: a pass that saw someone else's object under the fleet's names must hold
// the fleet. Any request to that object but a create (which changes nothing) breaks it, whatever
// its kind, and so does a status that is not Degraded with a holding reason. Someone else's
// workload of the kind the fleet does not run is never written either, but it holds nothing.
func TestHeldByNameTaken(t *testing.T) {
	fleet := func(profile v1alpha1.Profile, workload v1alpha1.WorkloadKind) *v1alpha1.CelldFleet {
		return &v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "uid-a"},
			Spec: v1alpha1.CelldFleetSpec{Profile: profile, Workload: workload}}
	}
	status := func(reason string) sim.Request {
		st := &v1alpha1.CelldFleetStatus{Conditions: []metav1.Condition{{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: reason}}}
		if reason == "" {
			st.Conditions[0].Status = metav1.ConditionFalse
		}
		return sim.Request{Verb: "update", Resource: "celldfleets/status", Namespace: "ns", Name: "a", Status: st}
	}
	req := func(verb, resource, name string) sim.Request {
		return sim.Request{Verb: verb, Resource: resource, Namespace: "ns", Name: name}
	}
	persistent := fleet(v1alpha1.ProfilePersistentFleet, "")
	bucket := fleet(v1alpha1.ProfileBucket, v1alpha1.WorkloadDeployment)
	cases := []struct {
		name  string
		f     *v1alpha1.CelldFleet
		taken []string
		sent  []sim.Request
		want  string // a part of the violation; empty when the pass keeps the promise
	}{
		{"held", persistent, []string{"Service/a-peers"}, []sim.Request{status("NameTaken"), req("apply", "services", "a")}, ""},
		{"a create of the name changes nothing", persistent, []string{"CelldReservation/r"}, []sim.Request{req("create", "celldreservations", "r"), status("NameTaken")}, ""},
		{"applied over", persistent, []string{"Service/a-peers"}, []sim.Request{req("apply", "services", "a-peers")}, "never patched, adopted or deleted"},
		{"a PodDisruptionBudget applied over", bucket, []string{"PodDisruptionBudget/a"}, []sim.Request{req("apply", "poddisruptionbudgets", "a")}, "never patched"},
		{"a NetworkPolicy deleted", bucket, []string{"NetworkPolicy/a-clients"}, []sim.Request{req("delete", "networkpolicies", "a-clients")}, "never patched"},
		{"a reservation updated", bucket, []string{"CelldReservation/r"}, []sim.Request{req("update", "celldreservations", "r")}, "never patched"},
		{"the workload written", persistent, []string{"Service/a"}, []sim.Request{req("apply", "statefulsets", "a")}, "its workload not written"},
		{"a status that does not hold", persistent, []string{"Service/a"}, []sim.Request{status("MemberStuck")}, `reason "MemberStuck"`},
		{"a status not Degraded", bucket, []string{"Service/a"}, []sim.Request{status("")}, "does not hold it"},
		{"the other workload kind holds nothing", persistent, []string{"Deployment/a"}, []sim.Request{status("MemberStuck"), req("apply", "statefulsets", "a")}, ""},
		{"the other workload kind is never written", persistent, []string{"Deployment/a"}, []sim.Request{req("apply", "deployments", "a")}, "never patched"},
		{"a Bucket fleet's other kind", bucket, []string{"StatefulSet/a"}, []sim.Request{status("MemberStuck"), req("apply", "deployments", "a")}, ""},
		{"another namespace's object of that name", persistent, []string{"Service/a-peers"}, []sim.Request{{Verb: "apply", Resource: "services", Namespace: "other", Name: "a-peers"}}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := judge.New(sim.New(sim.Options{}))
			err := j.Held(c.f, nil, nil, c.taken, c.sent)
			var v *judge.Violation
			switch {
			case c.want == "" && err != nil:
				t.Errorf("want the pass judged held, got %v", err)
			case c.want != "" && (!errors.As(err, &v) || v.Clause != judge.S6Held || !strings.Contains(v.Detail, c.want)):
				t.Errorf("want a violation of %q saying %q, got %v", judge.S6Held, c.want, err)
			}
		})
	}
}
