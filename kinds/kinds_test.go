package kinds

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestEveryRowIsItsOwnType: each row's Go type maps back to that row, so Of is the inverse of New.
func TestEveryRowIsItsOwnType(t *testing.T) {
	for _, r := range Table {
		if got := Of(r.New()); got != r.Kind {
			t.Errorf("Of(%T) = %q, want %q", r.New(), got, r.Kind)
		}
		if got, ok := Lookup(r.Kind); !ok || got.Kind != r.Kind {
			t.Errorf("Lookup(%s) = %v, %t", r.Kind, got.Kind, ok)
		}
		if r.Resource.Resource == "" || r.Version == "" {
			t.Errorf("%s has no resource or version", r.Kind)
		}
	}
	if Of(&corev1.Secret{}) != "" || Of(nil) != "" {
		t.Error("a type outside the table has a kind")
	}
}

func TestOnlyTheMembersRunnersAreWorkloads(t *testing.T) {
	if !IsWorkload(&appsv1.StatefulSet{}) || !IsWorkload(&appsv1.Deployment{}) {
		t.Error("StatefulSet and Deployment must be workloads")
	}
	if IsWorkload(&corev1.Service{}) || IsWorkload(&corev1.Pod{}) || IsWorkload(nil) {
		t.Error("a Service, a Pod or nothing is not a workload")
	}
}

func TestRefReadsAsAPersonLooksItUp(t *testing.T) {
	r := RefOf(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a-peers"}})
	if r != (Ref{Kind: Service, Namespace: "ns", Name: "a-peers"}) || r.String() != "Service/a-peers" {
		t.Errorf("RefOf = %+v (%s)", r, r)
	}
}
