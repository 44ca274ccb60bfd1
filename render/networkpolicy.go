package render

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
)

func init() {
	register(kinds.NetworkPolicy, func(f *v1alpha1.CelldFleet) []kinds.Object {
		var out []kinds.Object
		for _, p := range renderPolicies(f) {
			out = append(out, p)
		}
		return out
	})
}

// renderPolicies selects the members in two policies; a Pod selected by any Ingress policy denies
// every ingress no policy allows, so together they allow peers on the peer port and clients on
// the client port, and nothing else.
func renderPolicies(f *v1alpha1.CelldFleet) []*networkingv1.NetworkPolicy {
	client, peer := ports(f)
	tcp := corev1.ProtocolTCP
	members := metav1.LabelSelector{MatchLabels: SelectorLabels(f)}
	clients := f.Spec.Network.AllowedClients
	if len(clients) == 0 {
		clients = []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}
	}
	peerPort, clientPort := intstr.FromInt32(peer), intstr.FromInt32(client)
	policy := func(suffix string, from []networkingv1.NetworkPolicyPeer, port *intstr.IntOrString) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
			ObjectMeta: meta(f, f.Name+suffix, "network-policy"),
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: members,
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From:  from,
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: port}},
				}},
			},
		}
	}
	return []*networkingv1.NetworkPolicy{
		policy(kinds.SuffixClients, clients, &clientPort),
		policy(kinds.SuffixPeers, []networkingv1.NetworkPolicyPeer{{PodSelector: &members}}, &peerPort),
	}
}
