package v1alpha1_test

import (
	"strings"
	"testing"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// TestFleetTransitionRules: every rule that compares a fleet with its previous version, as the
// API server runs it on an update. What may change is admitted, what may not is refused, naming
// the field; a rule that refuses too much stops scaling and upgrades, one that refuses too little
// moves a fleet's bucket, disks or members under the operator's feet.
func TestFleetTransitionRules(t *testing.T) {
	adm := loadAdmission(t, "celld.io_celldfleets.yaml")
	bucket, persistent := v1alpha1.ProfileBucket, v1alpha1.ProfilePersistentFleet
	for _, c := range []struct {
		name    string
		profile v1alpha1.Profile
		old     func(map[string]any)
		edit    func(map[string]any)
		// refused is what the refusal must say, "" when the update is admitted.
		refused string
	}{
		{"nothing changed", bucket, nil, func(map[string]any) {}, ""},
		{"members, image and placement change", bucket, nil, func(o map[string]any) {
			set(o, int64(7), "spec", "members")
			set(o, "ghcr.io/celld/celld:2", "spec", "image")
			set(o, map[string]any{"nodeSelector": map[string]any{"disk": "ssd"}}, "spec", "placement")
		}, ""},
		{"a PersistentFleet's members change", persistent, nil, func(o map[string]any) { set(o, int64(5), "spec", "members") }, ""},

		{"profile Bucket to PersistentFleet", bucket, nil, func(o map[string]any) {
			set(o, string(persistent), "spec", "profile")
			set(o, map[string]any{"storageClassName": "standard", "size": "1Gi"}, "spec", "storage")
		}, "spec.profile is immutable"},
		{"profile PersistentFleet to Bucket", persistent, nil, func(o map[string]any) {
			set(o, string(bucket), "spec", "profile")
			delete(o["spec"].(map[string]any), "storage")
		}, "spec.profile is immutable"},

		{"bucket name", bucket, nil, func(o map[string]any) { set(o, "other-data", "spec", "bucket", "name") }, "spec.bucket is immutable"},
		{"bucket region", bucket, nil, func(o map[string]any) { set(o, "eu-west-1", "spec", "bucket", "region") }, "spec.bucket is immutable"},
		{"bucket endpoint added", bucket, nil, func(o map[string]any) {
			set(o, "https://minio.example.com", "spec", "bucket", "endpoint")
		}, "spec.bucket is immutable"},
		{"bucket endpoint changed", bucket,
			func(o map[string]any) { set(o, "https://minio.example.com", "spec", "bucket", "endpoint") },
			func(o map[string]any) { set(o, "https://other.example.com", "spec", "bucket", "endpoint") }, "spec.bucket is immutable"},

		{"workload kept", bucket,
			func(o map[string]any) { set(o, "OrderedStatefulSet", "spec", "workload") },
			func(o map[string]any) { set(o, int64(4), "spec", "members") }, ""},
		{"workload changed", bucket,
			func(o map[string]any) { set(o, "Deployment", "spec", "workload") },
			func(o map[string]any) { set(o, "OrderedStatefulSet", "spec", "workload") }, "spec.workload is immutable"},
		{"workload set where it was left to its default", bucket, nil,
			func(o map[string]any) { set(o, "OrderedStatefulSet", "spec", "workload") }, "spec.workload is immutable"},
		// Without the workload, the default (a Deployment) would replace the StatefulSet.
		{"workload removed", bucket,
			func(o map[string]any) { set(o, "OrderedStatefulSet", "spec", "workload") },
			func(o map[string]any) { delete(o["spec"].(map[string]any), "workload") }, "spec.workload is immutable"},

		{"storage grows", persistent, nil, func(o map[string]any) { set(o, "2Gi", "spec", "storage", "size") }, ""},
		{"storage shrinks", persistent, nil, func(o map[string]any) { set(o, "512Mi", "spec", "storage", "size") },
			"spec.storage.size must not shrink below 1Gi"},
		{"storage class", persistent, nil, func(o map[string]any) { set(o, "fast", "spec", "storage", "storageClassName") },
			"spec.storage.storageClassName is immutable"},
		{"storage removed", persistent, nil, func(o map[string]any) { delete(o["spec"].(map[string]any), "storage") },
			"spec.storage"},
	} {
		t.Run(c.name, func(t *testing.T) {
			old := baseFleet(c.profile)
			if c.old != nil {
				c.old(old)
			}
			if err := adm.admit(old); err != nil {
				t.Fatalf("the old fleet is refused on create: %v", err)
			}
			obj := baseFleet(c.profile)
			if c.old != nil {
				c.old(obj)
			}
			c.edit(obj)
			err := adm.update(old, obj)
			switch {
			case c.refused == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused)):
				t.Errorf("%v; want refused saying %q", err, c.refused)
			}
		})
	}
}

// TestReservationTransitionRules: a reservation's spec binds a bucket to one fleet for good: no
// field of it changes on an update, while its status (the capacity history) is written freely.
func TestReservationTransitionRules(t *testing.T) {
	adm := loadAdmission(t, "celld.io_celldreservations.yaml")
	base := func() map[string]any {
		return map[string]any{"apiVersion": "celld.io/v1alpha1", "kind": "CelldReservation",
			"metadata": map[string]any{"name": "r"},
			"spec": map[string]any{"fleetName": "fleet", "fleetUID": "u1", "profile": "Bucket",
				"bucket": map[string]any{"name": "celld-data", "region": "us-east-1"}}}
	}
	history := []any{map[string]any{"time": "2026-01-01T00:00:00Z", "kind": "Grow", "from": int64(0), "to": int64(3), "source": "Manual"}}
	for _, c := range []struct {
		name     string
		edit     func(map[string]any)
		admitted bool
	}{
		{"nothing changed", func(map[string]any) {}, true},
		{"history written", func(o map[string]any) { set(o, history, "status", "capacityHistory") }, true},
		{"labels written", func(o map[string]any) { set(o, map[string]any{"a": "b"}, "metadata", "labels") }, true},
		{"another fleet's UID", func(o map[string]any) { set(o, "u2", "spec", "fleetUID") }, false},
		{"another fleet's name", func(o map[string]any) { set(o, "other", "spec", "fleetName") }, false},
		{"another profile", func(o map[string]any) { set(o, "PersistentFleet", "spec", "profile") }, false},
		{"another bucket", func(o map[string]any) { set(o, "other-data", "spec", "bucket", "name") }, false},
		{"another store", func(o map[string]any) { set(o, "https://minio.example.com", "spec", "bucket", "endpoint") }, false},
	} {
		obj := base()
		c.edit(obj)
		err := adm.update(base(), obj)
		if c.admitted && err != nil {
			t.Errorf("%s: refused: %v", c.name, err)
		}
		if !c.admitted && (err == nil || !strings.Contains(err.Error(), "spec of a CelldReservation is immutable")) {
			t.Errorf("%s: %v; want refused as an immutable spec", c.name, err)
		}
	}
}
