package machine_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"pgregory.net/rapid"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	kindsof "github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/machine"
)

// nodeCase is one member's node as healing may find it.
type nodeCase struct {
	gone, fenced, ready bool
	// down is how long the node has been NotReady or unreachable, against the grace period.
	down        time.Duration
	terminating bool
}

// Fence before force: whatever the member's node, profile and workload, a Pod is force-deleted
// only when its node is gone or tainted out-of-service, with a premise that says so; a member
// with an identity (a StatefulSet's) on a node that may be alive is never deleted at all, and
// past the grace period the fleet says how to fence that node; a Deployment's member there is
// deleted gracefully, and only once.
func TestFenceBeforeForce(t *testing.T) {
	grace := time.Minute
	bases := map[string]events.View{
		"PersistentFleet":   convergedFleet(t, v1alpha1.ProfilePersistentFleet),
		"Bucket/Deployment": convergedFleet(t, v1alpha1.ProfileBucket),
		"Bucket/OrderedStatefulSet": func() events.View {
			v := convergedFleet(t, v1alpha1.ProfilePersistentFleet)
			v = copyView(v)
			v.Fleet.Spec.Profile, v.Fleet.Spec.Storage, v.Fleet.Spec.Workload = v1alpha1.ProfileBucket, nil, v1alpha1.WorkloadOrderedStatefulSet
			return v
		}(),
	}
	names := []string{"PersistentFleet", "Bucket/Deployment", "Bucket/OrderedStatefulSet"}
	rapid.Check(t, func(rt *rapid.T) {
		base := names[rapid.IntRange(0, len(names)-1).Draw(rt, "base")]
		v := copyView(bases[base])
		v.Nodes = map[string]events.NodeView{}
		for k, n := range bases[base].Nodes {
			v.Nodes[k] = n
		}
		i := rapid.IntRange(0, len(v.Members)-1).Draw(rt, "member")
		nc := nodeCase{
			gone:        rapid.Bool().Draw(rt, "gone"),
			fenced:      rapid.Bool().Draw(rt, "fenced"),
			ready:       rapid.Bool().Draw(rt, "ready"),
			down:        time.Duration(rapid.IntRange(0, 4).Draw(rt, "down")) * grace / 2,
			terminating: rapid.Bool().Draw(rt, "terminating"),
		}
		m := &v.Members[i]
		m.Terminating = nc.terminating
		m.Ready = false
		m.NotReadySince = v.Now.Add(-nc.down)
		stateful := base != "Bucket/Deployment"
		switch {
		case nc.gone:
			delete(v.Nodes, m.NodeName)
		default:
			v.Nodes[m.NodeName] = events.NodeView{Ready: nc.ready && !nc.fenced, Fenced: nc.fenced, UnhealthySince: v.Now.Add(-nc.down)}
		}
		v.Fleet.Spec.Healing.UnreachableGracePeriod = &metav1.Duration{Duration: grace}

		d := machine.New().Step(&v)
		deletes := 0
		unhealthy := nc.gone || nc.fenced || !nc.ready
		pastGrace := nc.down >= grace
		for _, a := range d.Actions {
			if a.Kind != machine.DeletePod {
				continue
			}
			deletes++
			if a.Name != m.Name {
				rt.Fatalf("deleted %s, but only %s is unhealthy", a.Name, m.Name)
			}
			if a.Force && !nc.gone && !nc.fenced {
				rt.Fatalf("force-deleted %s on node %s that is neither gone nor fenced (%+v)", m.Name, m.NodeName, nc)
			}
			if a.Force && (a.Premise == nil || a.Premise.Node != m.NodeName || a.Premise.NodeGone != nc.gone || a.Premise.NodeFenced != (nc.fenced && !nc.gone)) {
				rt.Fatalf("force-delete of %s with premise %+v, want node %s gone=%t fenced=%t", m.Name, a.Premise, m.NodeName, nc.gone, nc.fenced && !nc.gone)
			}
			// Clause 3 on the fresh read: the workload must not have changed since, or its
			// controller may be acting on a change the view has yet to show.
			wantKind := kindsof.StatefulSet
			if !stateful {
				wantKind = kindsof.Deployment
			}
			if p := a.Premise; p == nil || !p.Workload || p.WorkloadExists != v.Workload.Exists || p.WorkloadGeneration != v.Workload.Generation ||
				p.WorkloadRef.Kind != wantKind || p.WorkloadRef.Name != v.Fleet.Name {
				rt.Fatalf("heal of %s with premise %+v, want the %s %s at generation %d", m.Name, a.Premise, wantKind, v.Fleet.Name, v.Workload.Generation)
			}
			if !a.Force && (nc.gone || nc.fenced) {
				rt.Fatalf("graceful delete of %s on a node that is gone or fenced: its kubelet will never finish it", m.Name)
			}
			if !a.Force && (stateful || nc.terminating) {
				rt.Fatalf("graceful delete of %s (stateful %t, terminating %t) on an unfenced node: it frees nothing and says nothing", m.Name, stateful, nc.terminating)
			}
			if !a.Force && !pastGrace {
				rt.Fatalf("deleted %s within the grace period", m.Name)
			}
		}
		if deletes > 1 {
			rt.Fatalf("%d deletes in one step", deletes)
		}
		if (nc.gone || nc.fenced) && deletes == 0 {
			rt.Fatalf("member %s on a node that is gone or fenced was not replaced", m.Name)
		}
		if !nc.gone && !nc.fenced && !nc.ready && pastGrace && !stateful && !nc.terminating && deletes == 0 {
			rt.Fatalf("a Deployment's member on an unreachable node past grace was not replaced")
		}
		deg := conditionOf(d.Status, v1alpha1.ConditionDegraded)
		wantUnreachable := unhealthy && !nc.gone && !nc.fenced && pastGrace && (stateful || nc.terminating)
		if wantUnreachable {
			if deg.Status != metav1.ConditionTrue || deg.Reason != machine.ReasonMemberUnreachable {
				rt.Fatalf("Degraded %s %s, want True MemberUnreachable", deg.Status, deg.Reason)
			}
			for _, want := range []string{m.Name, m.NodeName, "node.kubernetes.io/out-of-service", "kubectl delete node " + m.NodeName,
				v.Now.Add(-nc.down).UTC().Format(time.RFC3339)} {
				if !strings.Contains(deg.Message, want) {
					rt.Fatalf("Degraded message does not say %q: %s", want, deg.Message)
				}
			}
			if !strings.Contains(d.Status.BlockedBy, "out-of-service") {
				rt.Fatalf("blockedBy does not say how to fence: %q", d.Status.BlockedBy)
			}
		} else if deg.Reason == machine.ReasonMemberUnreachable {
			rt.Fatalf("Degraded MemberUnreachable for %+v (stateful %t)", nc, stateful)
		}
	})
}

// A member on a node that may be alive blocks scale-in: it is not ready, and nothing replaces it.
func TestUnfencedMemberBlocksScaleIn(t *testing.T) {
	v := copyView(convergedFleet(t, v1alpha1.ProfilePersistentFleet))
	m := &v.Members[0]
	v.Nodes = map[string]events.NodeView{m.NodeName: {Ready: false, UnhealthySince: v.Now.Add(-time.Hour)}}
	for k, n := range convergedFleet(t, v1alpha1.ProfilePersistentFleet).Nodes {
		if k != m.NodeName {
			v.Nodes[k] = n
		}
	}
	v.Fleet.Spec.Members = 2
	d := machine.New().Step(&v)
	for _, a := range d.Actions {
		if a.Kind == machine.DeletePod || (a.Kind == machine.Apply && strings.Contains(a.Key, "replicas=2")) {
			t.Fatalf("%s while member %s is on an unfenced unreachable node", a, m.Name)
		}
	}
	if c := conditionOf(d.Status, v1alpha1.ConditionDegraded); c.Reason != machine.ReasonMemberUnreachable {
		t.Fatalf("Degraded %s, want MemberUnreachable", c.Reason)
	}
}

// The MemberUnreachable message names every unfenced member and its node, and says what
// becomes of the member once its node is fenced: on a PersistentFleet, its own disk.
func TestUnreachableMembersAreAllNamed(t *testing.T) {
	base := convergedFleet(t, v1alpha1.ProfilePersistentFleet)
	for _, down := range [][]int{{0}, {0, 1}} {
		v := copyView(base)
		v.Nodes = map[string]events.NodeView{}
		for k, n := range base.Nodes {
			v.Nodes[k] = n
		}
		for _, i := range down {
			v.Nodes[v.Members[i].NodeName] = events.NodeView{Ready: false, UnhealthySince: v.Now.Add(-time.Hour)}
		}
		c := conditionOf(machine.New().Step(&v).Status, v1alpha1.ConditionDegraded)
		if c.Reason != machine.ReasonMemberUnreachable || !strings.Contains(c.Message, "replaced under the same name, on its own disk") {
			t.Fatalf("%v down: Degraded %s %q, want MemberUnreachable saying the member comes back on its own disk", down, c.Reason, c.Message)
		}
		others := "; the same holds for members " + v.Members[1].Name + " on " + v.Members[1].NodeName
		if got := strings.Contains(c.Message, "the same holds"); got != (len(down) > 1) || got && !strings.HasSuffix(c.Message, others) {
			t.Errorf("%v down: Degraded %q; want %q exactly when two are down", down, c.Message, others)
		}
	}
}
