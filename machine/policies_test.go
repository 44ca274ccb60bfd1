package machine

import (
	"reflect"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/render"
)

// TestRenderPoliciesIngress: the members' policies allow ingress from the members on the peer
// port and from the allowed clients (the namespace's Pods when none are named) on the client
// port, and from nothing else: never a rule without sources, never a rule without a port.
func TestRenderPoliciesIngress(t *testing.T) {
	named := []networkingv1.NetworkPolicyPeer{
		{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "api"}}},
		{IPBlock: &networkingv1.IPBlock{CIDR: "10.20.0.0/16"}},
	}
	namespacePods := []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}
	for _, tc := range []struct {
		name         string
		network      v1alpha1.NetworkSpec
		client, peer int32
		wantClients  []networkingv1.NetworkPolicyPeer
	}{
		{"defaults", v1alpha1.NetworkSpec{}, 7000, 7001, namespacePods},
		{"named clients and ports", v1alpha1.NetworkSpec{ClientPort: 9100, PeerPort: 9101, AllowedClients: named}, 9100, 9101, named},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, profile := range []v1alpha1.Profile{v1alpha1.ProfilePersistentFleet, v1alpha1.ProfileBucket} {
				f := fleet(profile)
				f.Spec.Network = tc.network
				members := render.SelectorLabels(f)
				from := map[int32][]networkingv1.NetworkPolicyPeer{}
				for _, p := range render.OfType[*networkingv1.NetworkPolicy](render.Render(f, 3, 3)) {
					if !reflect.DeepEqual(p.Spec.PodSelector.MatchLabels, members) || len(p.Spec.PodSelector.MatchExpressions) != 0 {
						t.Errorf("%s: policy %s selects %v; want the members %v", profile, p.Name, p.Spec.PodSelector, members)
					}
					if !reflect.DeepEqual(p.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
						t.Errorf("%s: policy %s: policyTypes %v; want Ingress", profile, p.Name, p.Spec.PolicyTypes)
					}
					for _, r := range p.Spec.Ingress {
						if len(r.From) == 0 || len(r.Ports) != 1 || r.Ports[0].Port == nil || r.Ports[0].EndPort != nil {
							t.Fatalf("%s: policy %s: rule %+v; want sources and one port", profile, p.Name, r)
						}
						port := r.Ports[0].Port.IntVal
						if _, dup := from[port]; dup {
							t.Errorf("%s: port %d opened twice", profile, port)
						}
						from[port] = r.From
					}
				}
				wantPeers := []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: members}}}
				want := map[int32][]networkingv1.NetworkPolicyPeer{tc.peer: wantPeers, tc.client: tc.wantClients}
				if !reflect.DeepEqual(from, want) {
					t.Errorf("%s: ingress by port %v; want %v", profile, from, want)
				}
			}
		})
	}
}
