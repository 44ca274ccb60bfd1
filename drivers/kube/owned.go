package kube

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/celld/celld-operator/kinds"
)

// ownedClients is how the Applier reads and writes each owned kind of kinds.Table: the one column
// of the table that needs client-go, so it lives with the driver (TestEveryOwnedKindHasAClient).
var ownedClients = map[kinds.Kind]func(k kubernetes.Interface, ns string) objectClient{
	kinds.Service: func(k kubernetes.Interface, ns string) objectClient {
		return typedClient[*corev1.Service]{k.CoreV1().Services(ns)}
	},
	kinds.NetworkPolicy: func(k kubernetes.Interface, ns string) objectClient {
		return typedClient[*networkingv1.NetworkPolicy]{k.NetworkingV1().NetworkPolicies(ns)}
	},
	kinds.PodDisruptionBudget: func(k kubernetes.Interface, ns string) objectClient {
		return typedClient[*policyv1.PodDisruptionBudget]{k.PolicyV1().PodDisruptionBudgets(ns)}
	},
	kinds.StatefulSet: func(k kubernetes.Interface, ns string) objectClient {
		return typedClient[*appsv1.StatefulSet]{k.AppsV1().StatefulSets(ns)}
	},
	kinds.Deployment: func(k kubernetes.Interface, ns string) objectClient {
		return typedClient[*appsv1.Deployment]{k.AppsV1().Deployments(ns)}
	},
}

// objectClient reads and patches objects of one kind in one namespace.
type objectClient interface {
	get(ctx context.Context, name string) (metav1.Object, error)
	patch(ctx context.Context, name string, pt types.PatchType, body []byte, opts metav1.PatchOptions) error
}

// typed is what every client-go typed client of a kind offers.
type typed[T kinds.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

type typedClient[T kinds.Object] struct{ c typed[T] }

func (t typedClient[T]) get(ctx context.Context, name string) (metav1.Object, error) {
	o, err := t.c.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return o, nil
}

func (t typedClient[T]) patch(ctx context.Context, name string, pt types.PatchType, body []byte, opts metav1.PatchOptions) error {
	_, err := t.c.Patch(ctx, name, pt, body, opts)
	return err
}
