package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/celld/celld-operator/api/generated/clientset/versioned"
	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
)

type clients struct {
	kube  kubernetes.Interface
	celld versioned.Interface
}

func clientsFor(cc clientcmd.ClientConfig) (clients, string, error) {
	ns, _, err := cc.Namespace()
	if err != nil {
		return clients{}, "", fmt.Errorf("namespace: %w", err)
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		return clients{}, "", fmt.Errorf("kubeconfig: %w", err)
	}
	var cl clients
	if cl.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return clients{}, "", err
	}
	if cl.celld, err = versioned.NewForConfig(cfg); err != nil {
		return clients{}, "", err
	}
	return cl, ns, nil
}

// report is everything one screen shows, read once.
type report struct {
	fleet  *v1alpha1.CelldFleet
	pods   []corev1.Pod
	nodes  map[string]*corev1.Node // nil value: the node does not exist
	claims map[string]*corev1.PersistentVolumeClaim
	// reservation is the one bound to this fleet's UID, nil when none is; others names the
	// reservations of the fleet's bucket bound to another fleet.
	reservation *v1alpha1.CelldReservation
	// nodesHidden: the user may not read nodes (a tenant usually may not); zones show as "?".
	nodesHidden bool
}

func read(ctx context.Context, cl clients, ns, name string) (*report, error) {
	f, err := cl.celld.CelldV1alpha1().CelldFleets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("celldfleet %q not found in namespace %q (kubectl get celldfleets -n %s lists them)", name, ns, ns)
		}
		return nil, fmt.Errorf("get celldfleet %s/%s: %w", ns, name, err)
	}
	r := &report{fleet: f, nodes: map[string]*corev1.Node{}, claims: map[string]*corev1.PersistentVolumeClaim{}}
	// Members by the fleet's UID label: a fleet deleted and created again under the same name
	// does not inherit the old one's Pods on this screen.
	pods, err := cl.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: kinds.LabelFleetUID + "=" + string(f.UID)})
	if err != nil {
		return nil, fmt.Errorf("list the fleet's Pods: %w", err)
	}
	r.pods = pods.Items
	sort.Slice(r.pods, func(i, j int) bool { return memberLess(&r.pods[i], &r.pods[j]) })
	for i := range r.pods {
		p := &r.pods[i]
		if n := p.Spec.NodeName; n != "" && !r.nodesHidden {
			if _, seen := r.nodes[n]; !seen {
				node, err := cl.kube.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
				switch {
				case err == nil:
					r.nodes[n] = node
				case apierrors.IsNotFound(err):
					r.nodes[n] = nil
				case apierrors.IsForbidden(err):
					r.nodesHidden = true
				default:
					return nil, fmt.Errorf("get node %s: %w", n, err)
				}
			}
		}
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim == nil {
				continue
			}
			c, err := cl.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, v.PersistentVolumeClaim.ClaimName, metav1.GetOptions{})
			switch {
			case err == nil:
				r.claims[c.Name] = c
			case apierrors.IsNotFound(err):
				r.claims[v.PersistentVolumeClaim.ClaimName] = nil
			default:
				return nil, fmt.Errorf("get claim %s: %w", v.PersistentVolumeClaim.ClaimName, err)
			}
		}
	}
	res, err := cl.celld.CelldV1alpha1().CelldReservations(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list reservations: %w", err)
	}
	for i := range res.Items {
		if res.Items[i].Spec.FleetUID == f.UID {
			r.reservation = &res.Items[i]
		}
	}
	return r, nil
}

// annotate sets (value nil: removes) one annotation of the fleet with a merge patch, which
// touches no other field and needs no resourceVersion.
func annotate(ctx context.Context, cl clients, ns, name, key string, value *string) error {
	return mergePatch(ctx, cl, ns, name, map[string]any{"metadata": map[string]any{"annotations": map[string]*string{key: value}}},
		"annotate celldfleet %s/%s")
}

// setHibernate writes spec.hibernate alone, as a merge patch: the rest of the spec (spec.members
// above all) is left as it is.
func setHibernate(ctx context.Context, cl clients, ns, name string, hibernate bool) error {
	return mergePatch(ctx, cl, ns, name, map[string]any{"spec": map[string]any{"hibernate": hibernate}},
		fmt.Sprintf("set spec.hibernate=%t on celldfleet %%s/%%s", hibernate))
}

// mergePatch sends body to the fleet as a merge patch; what names the write in an error, with the
// fleet's namespace and name as its two %s.
func mergePatch(ctx context.Context, cl clients, ns, name string, body map[string]any, what string) error {
	patch, err := json.Marshal(body)
	if err != nil {
		return err
	}
	_, err = cl.celld.CelldV1alpha1().CelldFleets(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("celldfleet %q not found in namespace %q (kubectl get celldfleets -n %s lists them)", name, ns, ns)
	case err != nil:
		return fmt.Errorf(what+": %w", ns, name, err)
	}
	return nil
}

// memberLess orders a StatefulSet's members by ordinal (alpha-2 before alpha-10), others by name.
func memberLess(a, b *corev1.Pod) bool {
	oa, ob := ordinal(a.Name), ordinal(b.Name)
	if oa >= 0 && ob >= 0 && oa != ob {
		return oa < ob
	}
	return a.Name < b.Name
}

func ordinal(name string) int {
	n, mult := 0, 1
	i := len(name) - 1
	for ; i >= 0 && name[i] >= '0' && name[i] <= '9'; i-- {
		n += int(name[i]-'0') * mult
		mult *= 10
	}
	if i == len(name)-1 || i < 0 || name[i] != '-' {
		return -1
	}
	return n
}
