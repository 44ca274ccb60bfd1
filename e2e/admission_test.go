package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// admissionCase is one invalid fleet. change edits the typed object; raw edits its JSON, for what
// the typed object cannot say (a zero value omitempty drops, a field the schema does not know).
// Cases with update are applied to a stored, valid fleet and sent as an update.
type admissionCase struct {
	name    string
	profile v1alpha1.Profile
	update  bool
	scale   *int32 // when set, replicas sent to the scale subresource instead
	change  func(*v1alpha1.CelldFleet)
	raw     func(map[string]any)
	want    string // the field the API server's message must name
}

func i32(v int32) *int32 { return &v }

// TestAdmission: the API server refuses invalid fleets (schema, CEL rules, immutability) before
// any operator sees them, with a message that names the field. No operator runs in this test.
func TestAdmission(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	bucket, persistent := v1alpha1.ProfileBucket, v1alpha1.ProfilePersistentFleet
	cases := []admissionCase{
		{name: "unknown profile", profile: bucket, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Profile = "Cloud" }, want: "spec.profile"},
		{name: "profile missing", profile: bucket, raw: func(m map[string]any) { unset(m, "spec", "profile") }, want: "spec.profile"},
		{name: "zero members", profile: bucket, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Members = 0 }, want: "spec.members"},
		{name: "negative members", profile: bucket, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Members = -1 }, want: "spec.members"},
		{name: "1001 members", profile: bucket, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Members = 1001 }, want: "spec.members"},
		{name: "image missing", profile: bucket, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Image = "" }, want: "spec.image"},
		{name: "image with spaces", profile: bucket, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Image = "ghcr.io/celld/celld latest" }, want: "spec.image"},
		{name: "image too long", profile: bucket, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Image = "ghcr.io/" + strings.Repeat("a", 510) }, want: "spec.image"},
		{name: "bucket missing", profile: bucket, raw: func(m map[string]any) { unset(m, "spec", "bucket") }, want: "spec.bucket"},
		{name: "bucket name uppercase", profile: bucket, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Bucket.Name = "My-Bucket" }, want: "spec.bucket.name"},
		{name: "bucket name too short", profile: bucket, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Bucket.Name = "ab" }, want: "spec.bucket.name"},
		{name: "bucket name too long", profile: bucket, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Bucket.Name = strings.Repeat("b", 64) }, want: "spec.bucket.name"},
		{name: "bucket name with two dots", profile: bucket, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Bucket.Name = "celld..data" }, want: "spec.bucket.name"},
		{name: "bucket name with a leading dot", profile: bucket, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Bucket.Name = ".celld-data" }, want: "spec.bucket.name"},
		{name: "bucket name with a trailing hyphen", profile: bucket, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Bucket.Name = "celld-data-" }, want: "spec.bucket.name"},
		{name: "bucket name with an underscore", profile: bucket, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Bucket.Name = "celld_data" }, want: "spec.bucket.name"},
		{name: "region missing", profile: bucket, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Bucket.Region = "" }, want: "spec.bucket.region"},
		{name: "region malformed", profile: bucket, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Bucket.Region = "US_EAST_1" }, want: "spec.bucket.region"},
		{name: "endpoint without scheme", profile: bucket, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Bucket.Endpoint = "s3.example.com" }, want: "spec.bucket.endpoint"},
		{name: "endpoint not http", profile: bucket, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Bucket.Endpoint = "ftp://s3.example.com" }, want: "spec.bucket.endpoint"},
		{name: "endpoint with a space", profile: bucket, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Bucket.Endpoint = "https://s3.example .com" }, want: "spec.bucket.endpoint"},
		{name: "PersistentFleet without storage", profile: persistent, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Storage = nil }, want: "spec.storage"},
		{name: "Bucket with storage", profile: bucket, change: func(fl *v1alpha1.CelldFleet) {
			fl.Spec.Storage = &v1alpha1.StorageSpec{StorageClassName: "kwok-volume", Size: resource.MustParse("1Gi")}
		}, want: "spec.storage"},
		{name: "PersistentFleet with workload", profile: persistent, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Workload = v1alpha1.WorkloadDeployment }, want: "spec.workload"},
		{name: "PersistentFleet with scratch", profile: persistent, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Scratch = &v1alpha1.ScratchSpec{} }, want: "spec.scratch"},
		{name: "unknown workload", profile: bucket, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Workload = "DaemonSet" }, want: "spec.workload"},
		{name: "storage class empty", profile: persistent, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Storage.StorageClassName = "" }, want: "spec.storage.storageClassName"},
		{name: "storage size not a quantity", profile: persistent, raw: func(m map[string]any) { set(m, "lots", "spec", "storage", "size") }, want: "spec.storage.size"},
		{name: "storage size negative", profile: persistent, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Storage.Size = resource.MustParse("-1Gi") }, want: "spec.storage.size"},
		{name: "unknown capacity mode", profile: bucket, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Capacity.Mode = "Sometimes" }, want: "spec.capacity.mode"},
		{name: "minMembers zero", profile: bucket, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Capacity.MinMembers = i32(0) }, want: "spec.capacity.minMembers"},
		{name: "maxMembers 1001", profile: bucket, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Capacity.MaxMembers = i32(1001) }, want: "spec.capacity.maxMembers"},
		{name: "minMembers above maxMembers", profile: bucket, change: func(fl *v1alpha1.CelldFleet) {
			fl.Spec.Members, fl.Spec.Capacity.MinMembers, fl.Spec.Capacity.MaxMembers = 4, i32(5), i32(4)
		}, want: "spec.capacity.minMembers"},
		{name: "members below minMembers", profile: bucket, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Members, fl.Spec.Capacity.MinMembers = 2, i32(3) }, want: "spec.members"},
		{name: "members above maxMembers", profile: bucket, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Members, fl.Spec.Capacity.MaxMembers = 5, i32(4) }, want: "spec.members"},
		{name: "targetUtilization 0", profile: bucket, raw: func(m map[string]any) { set(m, int64(0), "spec", "capacity", "targetUtilization") }, want: "spec.capacity.targetUtilization"},
		{name: "targetUtilization 101", profile: bucket, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Capacity.TargetUtilization = 101 }, want: "spec.capacity.targetUtilization"},
		{name: "scaleInStabilization negative", profile: bucket, change: func(fl *v1alpha1.CelldFleet) {
			fl.Spec.Capacity.ScaleInStabilization = &metav1.Duration{Duration: -60e9}
		}, want: "spec.capacity.scaleInStabilization"},
		{name: "scaleInStabilization not a duration", profile: bucket, raw: func(m map[string]any) { set(m, "soon", "spec", "capacity", "scaleInStabilization") }, want: "spec.capacity.scaleInStabilization"},
		{name: "unreachableGracePeriod negative", profile: bucket, change: func(fl *v1alpha1.CelldFleet) {
			fl.Spec.Healing.UnreachableGracePeriod = &metav1.Duration{Duration: -5e9}
		}, want: "spec.healing.unreachableGracePeriod"},
		{name: "unreachableGracePeriod zero", profile: bucket, change: func(fl *v1alpha1.CelldFleet) {
			fl.Spec.Healing.UnreachableGracePeriod = &metav1.Duration{}
		}, want: "spec.healing.unreachableGracePeriod must be at least 10s"},
		{name: "unreachableGracePeriod below the minimum", profile: bucket, raw: func(m map[string]any) { set(m, "9.999s", "spec", "healing", "unreachableGracePeriod") }, want: "spec.healing.unreachableGracePeriod must be at least 10s"},
		{name: "unreachableGracePeriod not a duration", profile: bucket, raw: func(m map[string]any) { set(m, "soon", "spec", "healing", "unreachableGracePeriod") }, want: "spec.healing.unreachableGracePeriod"},
		{name: "clientPort equals peerPort", profile: bucket, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Network.ClientPort, fl.Spec.Network.PeerPort = 7100, 7100 }, want: "spec.network.clientPort"},
		{name: "clientPort privileged", profile: bucket, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Network.ClientPort = 80 }, want: "spec.network.clientPort"},
		{name: "clientPort zero", profile: bucket, raw: func(m map[string]any) { set(m, int64(0), "spec", "network", "clientPort") }, want: "spec.network.clientPort"},
		{name: "peerPort privileged", profile: bucket, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Network.PeerPort = 1023 }, want: "spec.network.peerPort"},
		{name: "peerPort above 65535", profile: bucket, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Network.PeerPort = 70000 }, want: "spec.network.peerPort"},
		{name: "unknown imagePullPolicy", profile: bucket, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.ImagePullPolicy = "Sometimes" }, want: "spec.imagePullPolicy"},
		{name: "serviceAccountName not a DNS name", profile: bucket, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.ServiceAccountName = "Celld_SA" }, want: "spec.serviceAccountName"},
		{name: "misspelled field", profile: bucket, raw: func(m map[string]any) { set(m, int64(3), "spec", "membres") }, want: "spec.membres"},

		{name: "profile changed", profile: bucket, update: true, change: func(fl *v1alpha1.CelldFleet) {
			fl.Spec.Profile, fl.Spec.Workload = v1alpha1.ProfilePersistentFleet, ""
			fl.Spec.Storage = &v1alpha1.StorageSpec{StorageClassName: "kwok-volume", Size: resource.MustParse("1Gi")}
		}, want: "spec.profile"},
		{name: "bucket name changed", profile: bucket, update: true, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Bucket.Name += "-2" }, want: "spec.bucket"},
		{name: "bucket region changed", profile: bucket, update: true, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Bucket.Region = "eu-west-1" }, want: "spec.bucket"},
		{name: "bucket endpoint added", profile: bucket, update: true, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Bucket.Endpoint = "https://s3.example.com" }, want: "spec.bucket"},
		{name: "workload changed", profile: bucket, update: true, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Workload = v1alpha1.WorkloadOrderedStatefulSet }, want: "spec.workload"},
		{name: "workload removed", profile: bucket, update: true, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Workload = "" }, want: "spec.workload"},
		{name: "storage size shrunk", profile: persistent, update: true, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Storage.Size = resource.MustParse("512Mi") }, want: "spec.storage.size must not shrink below 1Gi"},
		{name: "storage size shrunk in another unit", profile: persistent, update: true, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Storage.Size = resource.MustParse("1000Mi") }, want: "spec.storage.size must not shrink"},
		{name: "storage class changed", profile: persistent, update: true, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Storage.StorageClassName = "standard" }, want: "spec.storage.storageClassName is immutable"},
		{name: "storage removed", profile: persistent, update: true, change: func(fl *v1alpha1.CelldFleet) { fl.Spec.Storage = nil }, want: "spec.storage"},
		{name: "members above maxMembers on update", profile: bucket, update: true, change: func(fl *v1alpha1.CelldFleet) {
			fl.Spec.Capacity.MaxMembers, fl.Spec.Members = i32(3), 4
		}, want: "spec.members"},
		{name: "scale subresource to 0", profile: bucket, scale: i32(0), want: "spec.members"},
		{name: "scale subresource to 1001", profile: bucket, scale: i32(1001), want: "spec.members"},
		// Derived names: fleet "x-peers" would render the peer Service of fleet "x".
		{name: "fleet name ending in -peers", profile: bucket, change: func(fl *v1alpha1.CelldFleet) { fl.Name = "x-peers" }, want: "metadata.name"},
		{name: "fleet name ending in -clients", profile: persistent, change: func(fl *v1alpha1.CelldFleet) { fl.Name = "x-clients" }, want: "metadata.name"},
	}

	// The stored fleets the updates start from; creating them proves the base fleets valid.
	stored := map[v1alpha1.Profile]*v1alpha1.CelldFleet{}
	for _, p := range []v1alpha1.Profile{bucket, persistent} {
		stored[p] = f.create(f.baseFleet(p))
	}

	rest := suite.celld.CelldV1alpha1().RESTClient()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fl := f.baseFleet(c.profile)
			if c.update || c.scale != nil {
				var err error
				if fl, err = f.fleets().Get(f.ctx, stored[c.profile].Name, metav1.GetOptions{}); err != nil {
					t.Fatal(err)
				}
			} else {
				fl.Name = "invalid"
			}
			if c.change != nil {
				c.change(fl)
			}
			var body []byte
			if c.scale != nil {
				body = mustJSON(t, map[string]any{
					"apiVersion": "autoscaling/v1", "kind": "Scale",
					"metadata": map[string]any{"name": fl.Name, "namespace": f.ns},
					"spec":     map[string]any{"replicas": *c.scale},
				})
			} else {
				m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(fl)
				if err != nil {
					t.Fatal(err)
				}
				m["apiVersion"], m["kind"] = v1alpha1.SchemeGroupVersion.String(), "CelldFleet"
				delete(m, "status")
				if c.raw != nil {
					c.raw(m)
				}
				body = mustJSON(t, m)
			}
			// dryRun: nothing is stored either way; Strict: unknown fields are refused, as kubectl does.
			req := rest.Post().Namespace(f.ns).Resource("celldfleets")
			switch {
			case c.scale != nil:
				req = rest.Put().Namespace(f.ns).Resource("celldfleets").Name(fl.Name).SubResource("scale")
			case c.update:
				req = rest.Put().Namespace(f.ns).Resource("celldfleets").Name(fl.Name)
			}
			err := req.Param("dryRun", "All").Param("fieldValidation", "Strict").
				SetHeader("Content-Type", "application/json").Body(body).Do(f.ctx).Error()
			if err == nil {
				t.Fatalf("accepted; want it refused naming %s", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("refused, but the message does not name %s: %v", c.want, err)
			}
			t.Logf("refused: %v", err)
		})
	}

	t.Run("reservation spec changed", func(t *testing.T) {
		// A reservation's binding is immutable: only deleting it releases the bucket.
		held := f.bucket("held")
		r := &v1alpha1.CelldReservation{
			ObjectMeta: metav1.ObjectMeta{Name: held},
			Spec: v1alpha1.CelldReservationSpec{FleetName: "held", FleetUID: types.UID("00000000-0000-0000-0000-000000000001"),
				Profile: bucket, Bucket: v1alpha1.BucketSpec{Name: held, Region: "us-east-1"}},
		}
		client := suite.celld.CelldV1alpha1().CelldReservations(f.ns)
		r, err := client.Create(f.ctx, r, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create reservation: %v", err)
		}
		r.Spec.FleetUID = "00000000-0000-0000-0000-000000000002"
		_, err = client.Update(f.ctx, r, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil || !strings.Contains(err.Error(), "spec") || !strings.Contains(err.Error(), "immutable") {
			t.Fatalf("want the update refused as immutable spec, got %v", err)
		}
		t.Logf("refused: %v", err)
	})
	t.Logf("%d invalid fleets refused", len(cases))
}

// baseFleet is a valid fleet of each profile; the Bucket one names its workload so that changing
// or removing it is an update of a set field.
func (f *fixture) baseFleet(p v1alpha1.Profile) *v1alpha1.CelldFleet {
	fl := f.newFleet("valid-"+strings.ToLower(string(p)), p, 3)
	if p == v1alpha1.ProfileBucket {
		fl.Spec.Workload = v1alpha1.WorkloadDeployment
	}
	return fl
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// set puts v at path in a JSON object, creating the objects on the way.
func set(m map[string]any, v any, path ...string) {
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}

func unset(m map[string]any, path ...string) {
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			return
		}
		m = next
	}
	delete(m, path[len(path)-1])
}
