package render

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
)

func init() {
	register(kinds.Service, func(f *v1alpha1.CelldFleet) []kinds.Object {
		return []kinds.Object{renderClientService(f), renderPeerService(f)}
	})
}

func renderClientService(f *v1alpha1.CelldFleet) *corev1.Service {
	client, _ := ports(f)
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: meta(f, f.Name, "client"),
		Spec: corev1.ServiceSpec{
			Selector: SelectorLabels(f),
			Ports: []corev1.ServicePort{{Name: clientPortName, Port: client, TargetPort: intstr.FromString(clientPortName),
				Protocol: corev1.ProtocolTCP}},
		},
	}
}

// renderPeerService is headless and publishes not-ready addresses, so every member has stable
// per-Pod DNS before it is ready: a recovering member must reach its peers to become ready.
func renderPeerService(f *v1alpha1.CelldFleet) *corev1.Service {
	client, peer := ports(f)
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: meta(f, f.Name+kinds.SuffixPeers, "peers"),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 SelectorLabels(f),
			Ports: []corev1.ServicePort{
				{Name: peerPortName, Port: peer, TargetPort: intstr.FromString(peerPortName), Protocol: corev1.ProtocolTCP},
				{Name: clientPortName, Port: client, TargetPort: intstr.FromString(clientPortName), Protocol: corev1.ProtocolTCP},
			},
		},
	}
}
