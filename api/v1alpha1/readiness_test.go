package v1alpha1_test

import (
	"strings"
	"testing"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// TestReadinessAdmission: spec.readiness takes probe timings within bounds and refuses, naming the
// field, a zero or negative value, one past its bound, and a timeout longer than the period.
func TestReadinessAdmission(t *testing.T) {
	adm := loadAdmission(t, "celld.io_celldfleets.yaml")
	try := func(r map[string]any) error {
		obj := baseFleet(v1alpha1.ProfilePersistentFleet)
		set(obj, r, "spec", "readiness")
		return adm.admit(obj)
	}
	for _, ok := range []map[string]any{
		{},
		{"periodSeconds": int64(2), "failureThreshold": int64(2), "timeoutSeconds": int64(1)},
		{"periodSeconds": int64(30), "failureThreshold": int64(10), "timeoutSeconds": int64(30)},
		{"periodSeconds": int64(5)},
		{"failureThreshold": int64(1)},
		{"timeoutSeconds": int64(10)},
	} {
		if err := try(ok); err != nil {
			t.Errorf("%v refused: %v", ok, err)
		}
	}
	for _, bad := range []struct {
		r    map[string]any
		want string
	}{
		{map[string]any{"periodSeconds": int64(0)}, "spec.readiness.periodSeconds"},
		{map[string]any{"periodSeconds": int64(31)}, "spec.readiness.periodSeconds"},
		{map[string]any{"failureThreshold": int64(0)}, "spec.readiness.failureThreshold"},
		{map[string]any{"failureThreshold": int64(11)}, "spec.readiness.failureThreshold"},
		{map[string]any{"timeoutSeconds": int64(-1)}, "spec.readiness.timeoutSeconds"},
		{map[string]any{"periodSeconds": int64(2), "timeoutSeconds": int64(3)}, "spec.readiness.timeoutSeconds must be at most spec.readiness.periodSeconds"},
		{map[string]any{"timeoutSeconds": int64(11)}, "spec.readiness.timeoutSeconds must be at most spec.readiness.periodSeconds (default 10)"},
	} {
		err := try(bad.r)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: %v; want refused saying %q", bad.r, err, bad.want)
		}
	}
}
