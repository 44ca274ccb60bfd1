package sim

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// Every kind the store folds gets its event: observed, deleting or gone.
func TestObserveNamesEveryKind(t *testing.T) {
	at := time.Unix(1000, 0)
	for _, tc := range []struct {
		obj  any
		gone bool
		want EventKind
	}{
		{&v1alpha1.CelldFleet{}, false, Observed},
		{&v1alpha1.CelldFleet{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{Time: at}}}, false, Observed},
		{&corev1.Pod{}, true, Gone},
		{&corev1.Node{}, true, Gone},
		{&corev1.PersistentVolumeClaim{}, false, Observed},
		{&appsv1.StatefulSet{}, false, Observed},
	} {
		ev, err := Observe(tc.obj, tc.gone, at)
		if err != nil || ev.Kind != tc.want || !ev.Time.Equal(at) {
			t.Errorf("%T gone=%t: %v %v, want %s", tc.obj, tc.gone, ev.Kind, err, tc.want)
		}
	}
	if _, err := Observe("nonsense", false, at); err == nil {
		t.Error("an object of no known kind must be refused")
	}
}
