package e2e

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/render"
)

// TestNetworkPolicies: the NetworkPolicies the API server holds for each fleet select exactly its
// members and, being of type Ingress, deny them every ingress but two rules: the fleet's members
// on the peer port, and the allowed clients (spec.network.allowedClients, else the namespace's
// Pods) on the client port. Fleets of both profiles share the namespace, one with ports and
// clients of its own, so a policy that selects or admits too much shows up as another fleet's
// Pods.
func TestNetworkPolicies(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startOperator()
	persistent := f.newFleet("persistent", v1alpha1.ProfilePersistentFleet, 2)
	bucket := f.newFleet("bucket", v1alpha1.ProfileBucket, 2)
	guarded := f.newFleet("guarded", v1alpha1.ProfileBucket, 2)
	guarded.Spec.Workload = v1alpha1.WorkloadOrderedStatefulSet
	guarded.Spec.Network = v1alpha1.NetworkSpec{ClientPort: 9100, PeerPort: 9101, AllowedClients: []networkingv1.NetworkPolicyPeer{
		{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "api"}}},
		{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "frontend"}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"role": "web"}},
		},
		{IPBlock: &networkingv1.IPBlock{CIDR: "10.20.0.0/16", Except: []string{"10.20.9.0/24"}}},
	}}
	fleets := []*v1alpha1.CelldFleet{persistent, bucket, guarded}
	for i, fl := range fleets {
		fleets[i] = f.create(fl)
	}
	for i, fl := range fleets {
		fleets[i] = f.waitConverged(fl.Name)
	}

	pods, err := suite.kube.CoreV1().Pods(f.ns).List(f.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	policies, err := suite.kube.NetworkingV1().NetworkPolicies(f.ns).List(f.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, fl := range fleets {
		checkFleetPolicies(t, fl, pods.Items, policies.Items)
	}
}

// checkFleetPolicies judges the policies of the namespace against one fleet, by what their
// selectors select among the namespace's Pods.
func checkFleetPolicies(t *testing.T, fl *v1alpha1.CelldFleet, pods []corev1.Pod, policies []networkingv1.NetworkPolicy) {
	t.Helper()
	failures := 0
	errorf := func(format string, args ...any) {
		t.Helper()
		failures++
		t.Errorf(format, args...)
	}
	members := map[string]bool{}
	for _, p := range pods {
		if p.Labels[kinds.LabelFleetUID] == string(fl.UID) {
			members[p.Name] = true
		}
	}
	if len(members) != int(fl.Spec.Members) {
		t.Fatalf("fleet %s: %d members among the namespace's Pods; want %d", fl.Name, len(members), fl.Spec.Members)
	}
	selects := func(sel *metav1.LabelSelector) map[string]bool {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			t.Fatalf("fleet %s: selector %v: %v", fl.Name, sel, err)
		}
		out := map[string]bool{}
		for _, p := range pods {
			if s.Matches(labels.Set(p.Labels)) {
				out[p.Name] = true
			}
		}
		return out
	}
	client, peer := fl.Spec.Network.ClientPort, fl.Spec.Network.PeerPort
	wantClients := fl.Spec.Network.AllowedClients
	if len(wantClients) == 0 {
		wantClients = []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}
	}
	checkContainerPorts(t, fl, pods, client, peer)

	var mine []string
	rulesOn := map[int32]int{}
	for i := range policies {
		np := &policies[i]
		selected := selects(&np.Spec.PodSelector)
		touches := false
		for name := range selected {
			touches = touches || members[name]
		}
		owned := metav1.IsControlledBy(np, fl)
		if !touches && !owned {
			continue
		}
		mine = append(mine, np.Name)
		if !reflect.DeepEqual(selected, members) {
			errorf("fleet %s: policy %s selects %v; want exactly the members %v", fl.Name, np.Name, podNames(selected), podNames(members))
		}
		if !owned {
			errorf("fleet %s: policy %s selects its members but is not the fleet's", fl.Name, np.Name)
		}
		ingress := false
		for _, pt := range np.Spec.PolicyTypes {
			ingress = ingress || pt == networkingv1.PolicyTypeIngress
		}
		if !ingress {
			errorf("fleet %s: policy %s: policyTypes %v; want Ingress, so what no rule allows is denied", fl.Name, np.Name, np.Spec.PolicyTypes)
		}
		for j, rule := range np.Spec.Ingress {
			where := fmt.Sprintf("fleet %s: policy %s, ingress rule %d", fl.Name, np.Name, j)
			if len(rule.From) == 0 {
				errorf("%s: no from: every source allowed", where)
			}
			if len(rule.Ports) != 1 {
				errorf("%s: ports %v; want one port (none means every port)", where, rule.Ports)
				continue
			}
			port := rule.Ports[0]
			if port.Protocol == nil || *port.Protocol != corev1.ProtocolTCP || port.Port == nil || port.EndPort != nil {
				errorf("%s: port %+v; want one TCP port", where, port)
				continue
			}
			n := port.Port.IntVal
			if port.Port.StrVal != "" {
				errorf("%s: port %q by name; want the number", where, port.Port.StrVal)
			}
			rulesOn[n]++
			switch n {
			case peer:
				for _, from := range rule.From {
					if from.IPBlock != nil || from.NamespaceSelector != nil || from.PodSelector == nil {
						errorf("%s: peer port open to %s; want the fleet's members alone", where, describePeer(from))
					} else if got := selects(from.PodSelector); !reflect.DeepEqual(got, members) {
						errorf("%s: peer port open to Pods %v; want exactly the members %v", where, podNames(got), podNames(members))
					}
				}
			case client:
				if !reflect.DeepEqual(rule.From, wantClients) {
					errorf("%s: client port open to %s; want %s", where, describePeers(rule.From), describePeers(wantClients))
				}
			default:
				errorf("%s: port %d is neither the client port %d nor the peer port %d", where, n, client, peer)
			}
		}
	}
	if len(mine) == 0 {
		errorf("fleet %s: no NetworkPolicy selects its members", fl.Name)
	}
	if rulesOn[peer] == 0 || rulesOn[client] == 0 {
		errorf("fleet %s: rules on the peer port %d: %d, on the client port %d: %d; want both reachable", fl.Name, peer, rulesOn[peer], client, rulesOn[client])
	}
	if failures > 0 {
		return
	}
	t.Logf("fleet %s (%s): policies %v select its %d members; ingress only from its members on %d and from %s on %d",
		fl.Name, fl.Spec.Profile, mine, len(members), peer, describePeers(wantClients), client)
}

// checkContainerPorts: the ports the policies open are the ones celld listens on, or a policy on a
// number would open nothing.
func checkContainerPorts(t *testing.T, fl *v1alpha1.CelldFleet, pods []corev1.Pod, client, peer int32) {
	t.Helper()
	for _, p := range pods {
		if p.Labels[kinds.LabelFleetUID] != string(fl.UID) {
			continue
		}
		got := map[string]int32{}
		for _, c := range p.Spec.Containers {
			if c.Name != render.ContainerName {
				continue
			}
			for _, cp := range c.Ports {
				got[cp.Name] = cp.ContainerPort
			}
		}
		if got["client"] != client || got["peer"] != peer || len(got) != 2 {
			t.Errorf("member %s listens on %v; want client %d and peer %d", p.Name, got, client, peer)
		}
	}
}

func describePeers(peers []networkingv1.NetworkPolicyPeer) string {
	var out []string
	for _, p := range peers {
		out = append(out, describePeer(p))
	}
	return "[" + strings.Join(out, ", ") + "]"
}

func describePeer(p networkingv1.NetworkPolicyPeer) string {
	if p.IPBlock != nil {
		return fmt.Sprintf("ipBlock{%s except %v}", p.IPBlock.CIDR, p.IPBlock.Except)
	}
	selector := func(s *metav1.LabelSelector, every string) string {
		if len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0 {
			return every
		}
		return "{" + metav1.FormatLabelSelector(s) + "}"
	}
	switch {
	case p.PodSelector == nil && p.NamespaceSelector == nil:
		return "everyone"
	case p.NamespaceSelector == nil:
		return "pods " + selector(p.PodSelector, "(all)") + " of the namespace"
	case p.PodSelector == nil:
		return "every pod of namespaces " + selector(p.NamespaceSelector, "(all)")
	}
	return "pods " + selector(p.PodSelector, "(all)") + " of namespaces " + selector(p.NamespaceSelector, "(all)")
}

func podNames(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
