package v1alpha1_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"github.com/celld/celld-operator/api/generated/clientset/versioned/scheme"
	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/deploy/crds"
)

// admission is what the API server checks a custom resource against, offline: the shipped CRD's
// defaults, structural schema (types, formats, patterns, bounds) and CEL rules.
type admission struct {
	structural *structuralschema.Structural
	schema     apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

func loadAdmission(t testing.TB, file string) *admission {
	t.Helper()
	// The bytes the crds package embeds, not a read of the file: make mutants changes a rule
	// through a build overlay, which only what the build reads sees.
	data, ok := map[string][]byte{
		"celld.io_celldfleets.yaml":         crds.CelldFleet,
		"celld.io_celldreservations.yaml":   crds.CelldReservation,
		"celld.io_celldbucketpolicies.yaml": crds.CelldBucketPolicy,
	}[file]
	if !ok {
		t.Fatalf("no CRD %s in deploy/crds", file)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatal(err)
	}
	// The API server validates the CRD itself first, CEL cost estimates included.
	internalCRD := &apiextensions.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, internalCRD, nil); err != nil {
		t.Fatal(err)
	}
	// As the API server records it: the objects are stored in the version marked for storage.
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			internalCRD.Status.StoredVersions = []string{v.Name}
		}
	}
	if errs := apiextensionsvalidation.ValidateCustomResourceDefinition(context.Background(), internalCRD); len(errs) > 0 {
		t.Fatalf("the API server would refuse %s: %v", file, errs.ToAggregate())
	}
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(crd.Spec.Versions[0].Schema.OpenAPIV3Schema, internal, nil); err != nil {
		t.Fatal(err)
	}
	s, err := structuralschema.NewStructural(internal)
	if err != nil {
		t.Fatal(err)
	}
	v, _, err := apiservervalidation.NewSchemaValidator(internal)
	if err != nil {
		t.Fatal(err)
	}
	return &admission{structural: s, schema: v, cel: cel.NewValidator(s, true, celconfig.PerCallLimit)}
}

// admit returns the API server's refusal of obj on create, nil when it would be stored. obj is
// defaulted in place, as the API server stores it.
func (a *admission) admit(obj map[string]any) error {
	defaulting.Default(obj, a.structural)
	if errs := apiservervalidation.ValidateCustomResource(nil, obj, a.schema); len(errs) > 0 {
		return errs.ToAggregate()
	}
	// Lists of x-kubernetes-list-type map or set refuse duplicate keys.
	if errs := listtype.ValidateListSetsAndMaps(nil, a.structural, obj); len(errs) > 0 {
		return errs.ToAggregate()
	}
	errs, _ := a.cel.Validate(context.Background(), field.NewPath(""), a.structural, obj, nil, celconfig.RuntimeCELCostBudget)
	if len(errs) > 0 {
		return errs.ToAggregate()
	}
	return nil
}

// decodeInto decodes obj the way the operator's clientset does: its scheme's codecs.
func decodeInto(obj map[string]any, into runtime.Object) error {
	data, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	_, _, err = serializer.NewCodecFactory(scheme.Scheme).UniversalDeserializer().Decode(data, nil, into)
	return err
}

// hostile values, drawn for every kind of field admission must bound.

func digits(t *rapid.T, label string, max int) string {
	return rapid.StringMatching(fmt.Sprintf(`[0-9]{1,%d}`, max)).Draw(t, label)
}

func durationValue(t *rapid.T) string {
	picked := rapid.SampledFrom([]string{"2562048h", "2562047h", "168h", "168h0m0.000000001s", "167h59m60s", "9223372036854775807ns",
		"9223372036854775808ns", "153722867m", "1.5h", "0s", "0.0000000001s", "99999999999999999999h", "604800s", "10080m"})
	return rapid.OneOf(picked.AsAny(), rapid.Custom(func(t *rapid.T) any {
		n := rapid.IntRange(1, 3).Draw(t, "parts")
		var b strings.Builder
		for i := 0; i < n; i++ {
			b.WriteString(digits(t, "int", 22))
			if rapid.Bool().Draw(t, "frac") {
				b.WriteString("." + digits(t, "frac", 12))
			}
			b.WriteString(rapid.SampledFrom([]string{"ns", "us", "µs", "ms", "s", "m", "h"}).Draw(t, "unit"))
		}
		return b.String()
	})).Draw(t, "duration").(string)
}

func quantityValue(t *rapid.T) any {
	picked := rapid.SampledFrom([]any{"1e1.5", "1E1.5", "1e.5", "1e+1.5", "1.e1", ".5e1", "1e1000000", "1e-1000000", "9223372036854775807",
		"9223372036854775808Ei", "1Ei", "1023Pi", "1Pi", "0.000000001n", "+1Gi", "-0", "0", ".5", "5.", int64(1) << 62, int64(-1), float64(1.5)})
	return rapid.OneOf(picked, rapid.Custom(func(t *rapid.T) any {
		s := rapid.SampledFrom([]string{"", "+", "-"}).Draw(t, "sign") + digits(t, "int", 25)
		if rapid.Bool().Draw(t, "frac") {
			s += "." + rapid.StringMatching(`[0-9]{0,12}`).Draw(t, "frac")
		}
		suffix := rapid.SampledFrom([]string{"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E", "e", "E"}).Draw(t, "suffix")
		if suffix == "e" || suffix == "E" {
			suffix += rapid.SampledFrom([]string{"", "+", "-"}).Draw(t, "esign") + digits(t, "exp", 8)
			if rapid.Bool().Draw(t, "efrac") {
				suffix += "." + digits(t, "efrac", 3)
			}
		}
		return s + suffix
	})).Draw(t, "quantity")
}

func timeValue(t *rapid.T) string {
	picked := rapid.SampledFrom([]string{"2026-01-01t00:00:00z", "2026-01-01T00:00:00z", "2026-01-01t00:00:00Z", "2026-01-01 00:00:00Z",
		"2026-02-30T00:00:00Z", "2026-01-01T24:00:00Z", "2026-01-01T23:59:60Z", "2026-01-01T00:00:00+24:00", "2026-01-01T00:00:00+0100",
		"2026-01-01T00:00:00.123456789123Z", "0000-01-01T00:00:00Z", "9999-12-31T23:59:59.999999999-23:59", "2026-01-01T00:00Z", "2026-01-01"})
	return rapid.OneOf(picked, rapid.Custom(func(t *rapid.T) string {
		return fmt.Sprintf("%04d-%02d-%02d%s%02d:%02d:%02d%s%s",
			rapid.IntRange(0, 9999).Draw(t, "y"), rapid.IntRange(0, 13).Draw(t, "mo"), rapid.IntRange(0, 32).Draw(t, "d"),
			rapid.SampledFrom([]string{"T", "t", " "}).Draw(t, "T"),
			rapid.IntRange(0, 25).Draw(t, "h"), rapid.IntRange(0, 60).Draw(t, "mi"), rapid.IntRange(0, 61).Draw(t, "s"),
			rapid.SampledFrom([]string{"", ".5", ".123456789", ".1234567890"}).Draw(t, "frac"),
			rapid.SampledFrom([]string{"Z", "z", "+01:00", "-23:59", "+24:00", "+00:60", ""}).Draw(t, "zone"))
	}), rapid.Custom(func(t *rapid.T) string {
		// Valid in form, at the edges of every range.
		return fmt.Sprintf("%04d-%02d-%02dT%02d:%02d:%02d%sZ",
			rapid.IntRange(0, 9999).Draw(t, "y"), rapid.IntRange(1, 12).Draw(t, "mo"), rapid.IntRange(1, 31).Draw(t, "d"),
			rapid.IntRange(0, 23).Draw(t, "h"), rapid.IntRange(0, 59).Draw(t, "mi"), rapid.IntRange(0, 59).Draw(t, "s"),
			rapid.SampledFrom([]string{"", ".5", ".123456789"}).Draw(t, "frac"))
	})).Draw(t, "time")
}

func intValue(t *rapid.T) int64 {
	return rapid.OneOf(rapid.SampledFrom([]int64{-1, 0, 1000, 1001, 1 << 31, 1<<31 - 1, -1 << 31, -1<<31 - 1, 1<<63 - 1}),
		rapid.Int64()).Draw(t, "int")
}

func set(m map[string]any, v any, path ...string) {
	for _, p := range path[:len(path)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}

func baseFleet(profile v1alpha1.Profile) map[string]any {
	spec := map[string]any{
		"profile": string(profile), "members": int64(3), "image": "ghcr.io/celld/celld:1",
		"bucket": map[string]any{"name": "celld-data", "region": "us-east-1"},
	}
	if profile == v1alpha1.ProfilePersistentFleet {
		spec["storage"] = map[string]any{"storageClassName": "standard", "size": "1Gi"}
	}
	return map[string]any{"apiVersion": "celld.io/v1alpha1", "kind": "CelldFleet",
		"metadata": map[string]any{"name": "fleet", "namespace": "ns"}, "spec": spec}
}

// TestAdmittedFleetsDecode: every CelldFleet the shipped CRD admits, with hostile values in each
// duration, quantity and bounded field, decodes with the operator's codec.
func TestAdmittedFleetsDecode(t *testing.T) {
	adm := loadAdmission(t, "celld.io_celldfleets.yaml")
	if err := adm.admit(baseFleet(v1alpha1.ProfileBucket)); err != nil {
		t.Fatalf("the base fleet is refused: %v", err)
	}
	admitted := map[string]int{}
	// Each field gets draws of its own: sampled among all, a rare one could go a whole run
	// without a value admitted, and prove nothing.
	for _, field := range []string{"scaleInStabilization", "unreachableGracePeriod", "storage.size", "scratch.sizeLimit",
		"requests.cpu", "limits.memory", "targetUtilization", "clientPort", "members", "maxSkew", "tolerationSeconds", "weight"} {
		profiles := []v1alpha1.Profile{v1alpha1.ProfileBucket, v1alpha1.ProfilePersistentFleet}
		switch field {
		case "storage.size":
			profiles = profiles[1:]
		case "scratch.sizeLimit":
			profiles = profiles[:1]
		}
		rapid.Check(t, func(t *rapid.T) {
			profile := rapid.SampledFrom(profiles).Draw(t, "profile")
			obj := baseFleet(profile)
			switch field {
			case "scaleInStabilization":
				set(obj, durationValue(t), "spec", "capacity", "scaleInStabilization")
			case "unreachableGracePeriod":
				set(obj, durationValue(t), "spec", "healing", "unreachableGracePeriod")
			case "storage.size":
				if profile != v1alpha1.ProfilePersistentFleet {
					t.Skip("storage is PersistentFleet only")
				}
				set(obj, quantityValue(t), "spec", "storage", "size")
			case "scratch.sizeLimit":
				if profile != v1alpha1.ProfileBucket {
					t.Skip("scratch is Bucket only")
				}
				set(obj, quantityValue(t), "spec", "scratch", "sizeLimit")
			case "requests.cpu":
				set(obj, quantityValue(t), "spec", "resources", "requests", "cpu")
			case "limits.memory":
				set(obj, quantityValue(t), "spec", "resources", "limits", "memory")
			case "maxSkew":
				set(obj, []any{map[string]any{"maxSkew": intValue(t), "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}}, "spec", "placement", "topologySpreadConstraints")
			case "tolerationSeconds":
				set(obj, []any{map[string]any{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": intValue(t)}}, "spec", "placement", "tolerations")
			case "weight":
				set(obj, map[string]any{"podAntiAffinity": map[string]any{"preferredDuringSchedulingIgnoredDuringExecution": []any{
					map[string]any{"weight": intValue(t), "podAffinityTerm": map[string]any{"topologyKey": "zone"}}}}}, "spec", "placement", "affinity")
			default:
				set(obj, intValue(t), "spec", field)
			}
			obj = roundTrip(t, obj)
			if err := adm.admit(obj); err != nil {
				return
			}
			admitted[field]++
			f := &v1alpha1.CelldFleet{}
			if err := decodeInto(obj, f); err != nil {
				t.Fatalf("admitted but does not decode: %v\n%s", err, mustJSON(obj))
			}
		})
	}
	for _, field := range []string{"scaleInStabilization", "unreachableGracePeriod", "storage.size", "requests.cpu"} {
		if admitted[field] == 0 {
			t.Errorf("no value of %s was admitted: the generator proves nothing for it", field)
		}
	}
}

// TestAdmittedReservationsDecode: every CelldReservation the shipped CRD admits, with hostile
// times and sizes in its history, decodes with the operator's codec.
func TestAdmittedReservationsDecode(t *testing.T) {
	adm := loadAdmission(t, "celld.io_celldreservations.yaml")
	admitted := 0
	rapid.Check(t, func(t *rapid.T) {
		entry := map[string]any{"time": timeValue(t), "kind": "Grow", "from": int64(0), "to": int64(3), "source": "Manual"}
		if rapid.IntRange(0, 3).Draw(t, "hostile ints") == 0 {
			entry["from"], entry["to"] = intValue(t), intValue(t)
		}
		obj := map[string]any{"apiVersion": "celld.io/v1alpha1", "kind": "CelldReservation",
			"metadata": map[string]any{"name": "r", "namespace": "ns"},
			"spec": map[string]any{"fleetName": "fleet", "fleetUID": "u", "profile": "Bucket",
				"bucket": map[string]any{"name": "celld-data", "region": "us-east-1"}},
			"status": map[string]any{"capacityHistory": []any{entry}}}
		obj = roundTrip(t, obj)
		if err := adm.admit(obj); err != nil {
			return
		}
		admitted++
		r := &v1alpha1.CelldReservation{}
		if err := decodeInto(obj, r); err != nil {
			t.Fatalf("admitted but does not decode: %v\n%s", err, mustJSON(obj))
		}
	})
	if admitted == 0 {
		t.Errorf("no reservation was admitted: the generator proves nothing")
	}
}

// roundTrip gives obj the types the API server decodes JSON into (int64, float64).
func roundTrip(t *rapid.T, obj map[string]any) map[string]any {
	out := map[string]any{}
	if err := utiljson.Unmarshal([]byte(mustJSON(obj)), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func mustJSON(obj any) string {
	b, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestNamesAdmission: the shipped CRD refuses fleet names whose derived objects would be invalid
// and bucket names and endpoints S3 would not take, and admits the longest valid ones.
func TestNamesAdmission(t *testing.T) {
	adm := loadAdmission(t, "celld.io_celldfleets.yaml")
	try := func(name, bucket, endpoint string) error {
		obj := baseFleet(v1alpha1.ProfileBucket)
		set(obj, name, "metadata", "name")
		if bucket != "" {
			set(obj, bucket, "spec", "bucket", "name")
		}
		if endpoint != "" {
			set(obj, endpoint, "spec", "bucket", "endpoint")
		}
		return adm.admit(obj)
	}
	for _, ok := range []struct{ name, bucket, endpoint string }{
		{"f" + strings.Repeat("x", 51), "", ""},
		{"a", strings.Repeat("b", 63), ""},
		{"a", "my.data-1.v2", "https://[2001:db8::1]:9000/"},
		{"a", "abc", "http://minio.example.com:9000"},
		{"a", "abc", "HTTPS://S3.AMAZONAWS.COM.:443/abc"},
		{"a", "abc", "https://key@s3.example.com"},
	} {
		if err := try(ok.name, ok.bucket, ok.endpoint); err != nil {
			t.Errorf("%+v refused: %v", ok, err)
		}
	}
	for _, bad := range []struct{ name, bucket, endpoint, want string }{
		{"f" + strings.Repeat("x", 52), "", "", "at most 52"},
		{strings.Repeat("a", 63), "", "", "at most 52"},
		{"1fleet", "", "", "DNS label"},
		{"my.fleet", "", "", "DNS label"},
		{"a", "ab-.cd", "", "dot next to a hyphen"},
		{"a", "ab.-cd", "", "dot next to a hyphen"},
		{"a", "a..b", "", "two adjacent dots"},
		{"a", "192.168.5.4", "", "IP address"},
		{"a", "xn--abc", "", "xn--"},
		{"a", "sthree-abc", "", "sthree-"},
		{"a", "abc-s3alias", "", "-s3alias"},
		{"a", "abc--x-s3", "", "--x-s3"},
		{"a", "abc", "https://", "spec.bucket.endpoint"},
		{"a", "abc", "https:///path", "spec.bucket.endpoint"},
		{"a", "abc", "ftp://s3.example.com", "spec.bucket.endpoint"},
		{"a", "abc", "s3.example.com", "spec.bucket.endpoint"},
	} {
		err := try(bad.name, bad.bucket, bad.endpoint)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: %v; want refused saying %q", bad, err, bad.want)
		}
	}
}

// TestSamplesAdmittedAndDecoded: the shipped samples pass the shipped CRD and decode.
func TestSamplesAdmittedAndDecoded(t *testing.T) {
	adm := loadAdmission(t, "celld.io_celldfleets.yaml")
	for _, file := range []string{"bucket-fleet.yaml", "persistent-fleet.yaml"} {
		data, err := os.ReadFile(filepath.Join("../../deploy/samples", file))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(data), "\n---") {
			obj := map[string]any{}
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if obj["kind"] != "CelldFleet" {
				continue
			}
			set(obj, "ns", "metadata", "namespace")
			if err := adm.admit(obj); err != nil {
				t.Errorf("%s refused: %v", file, err)
				continue
			}
			if err := decodeInto(obj, &v1alpha1.CelldFleet{}); err != nil {
				t.Errorf("%s does not decode: %v", file, err)
			}
		}
	}
}

// TestPodSettingsAdmission: spec.pod takes what a Pod takes and refuses, naming the field, what
// the API server would later refuse on the members' workload.
func TestPodSettingsAdmission(t *testing.T) {
	adm := loadAdmission(t, "celld.io_celldfleets.yaml")
	try := func(pod map[string]any) error {
		obj := baseFleet(v1alpha1.ProfileBucket)
		set(obj, pod, "spec", "pod")
		return adm.admit(obj)
	}
	long := strings.Repeat("a", 63)
	for _, ok := range []map[string]any{
		{"labels": map[string]any{"team": "storage", "example.com/tier": "", "a.b-c.d/" + long: long, "A_b.c": "x-Y_z.1"}},
		{"annotations": map[string]any{"prometheus.io/scrape": "true", "note": strings.Repeat("x", 4096)}},
		{"priorityClassName": "fleet-critical.v2"},
		{"imagePullSecrets": []any{map[string]any{"name": "regcred"}, map[string]any{"name": "mirror"}}},
		{"env": []any{
			map[string]any{"name": "LOG_LEVEL", "value": "debug"},
			map[string]any{"name": "my.var-1"},
			map[string]any{"name": "TOKEN", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "s", "key": "token", "optional": true}}},
			map[string]any{"name": "MODE", "valueFrom": map[string]any{"configMapKeyRef": map[string]any{"name": "cm", "key": "mode.conf"}}},
		}},
	} {
		if err := try(ok); err != nil {
			t.Errorf("%v refused: %v", ok, err)
		}
	}
	for _, bad := range []struct {
		pod  map[string]any
		want string
	}{
		{map[string]any{"labels": map[string]any{"-team": "x"}}, "spec.pod.labels keys must be label keys"},
		{map[string]any{"labels": map[string]any{"Example.com/team": "x"}}, "spec.pod.labels keys"},
		{map[string]any{"labels": map[string]any{"a/b/c": "x"}}, "spec.pod.labels keys"},
		{map[string]any{"labels": map[string]any{strings.Repeat("a", 64): "x"}}, "spec.pod.labels keys"},
		{map[string]any{"labels": map[string]any{"team": "has space"}}, "spec.pod.labels.team"},
		{map[string]any{"labels": map[string]any{"team": "x" + long}}, "spec.pod.labels.team"},
		{map[string]any{"labels": map[string]any{"team": "-x"}}, "spec.pod.labels.team"},
		{map[string]any{"annotations": map[string]any{"a b": "x"}}, "spec.pod.annotations keys"},
		{map[string]any{"annotations": map[string]any{"note": strings.Repeat("x", 4097)}}, "spec.pod.annotations.note"},
		{map[string]any{"priorityClassName": "Critical"}, "spec.pod.priorityClassName"},
		{map[string]any{"imagePullSecrets": []any{map[string]any{"name": "a"}, map[string]any{"name": "a"}}}, "spec.pod.imagePullSecrets[1]"},
		{map[string]any{"imagePullSecrets": []any{map[string]any{"name": "Reg_Cred"}}}, "spec.pod.imagePullSecrets[0].name"},
		{map[string]any{"env": []any{map[string]any{"name": "A", "value": "1"}, map[string]any{"name": "A", "value": "2"}}}, "spec.pod.env[1]"},
		{map[string]any{"env": []any{map[string]any{"name": "1A"}}}, "spec.pod.env[0].name"},
		{map[string]any{"env": []any{map[string]any{"name": "A=B"}}}, "spec.pod.env[0].name"},
		{map[string]any{"env": []any{map[string]any{"name": "A", "value": "1", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "s", "key": "k"}}}}}, "set value or valueFrom, not both"},
		{map[string]any{"env": []any{map[string]any{"name": "A", "valueFrom": map[string]any{}}}}, "exactly one of secretKeyRef and configMapKeyRef"},
		{map[string]any{"env": []any{map[string]any{"name": "A", "valueFrom": map[string]any{
			"secretKeyRef": map[string]any{"name": "s", "key": "k"}, "configMapKeyRef": map[string]any{"name": "c", "key": "k"}}}}}, "exactly one of secretKeyRef and configMapKeyRef"},
		{map[string]any{"env": []any{map[string]any{"name": "A", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "s"}}}}}, "spec.pod.env[0].valueFrom.secretKeyRef.key"},
		{map[string]any{"env": []any{map[string]any{"name": "A", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "s", "key": "a/b"}}}}}, "spec.pod.env[0].valueFrom.secretKeyRef.key"},
	} {
		err := try(bad.pod)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: %v; want refused saying %q", bad.pod, err, bad.want)
		}
	}
}

// TestMemberVolumesAndSidecarsAdmission: spec.pod's security context, envFrom, volumes, mounts
// and sidecars take what the restricted Pod Security level and the API server allow, and refuse,
// naming the field, the operator's names and paths, root, and mounts of volumes that do not exist.
func TestMemberVolumesAndSidecarsAdmission(t *testing.T) {
	adm := loadAdmission(t, "celld.io_celldfleets.yaml")
	try := func(pod map[string]any) error {
		obj := baseFleet(v1alpha1.ProfilePersistentFleet)
		set(obj, pod, "spec", "pod")
		return adm.admit(obj)
	}
	vol := func(name string) map[string]any {
		return map[string]any{"name": name, "emptyDir": map[string]any{}}
	}
	mount := func(name, path string) map[string]any { return map[string]any{"name": name, "mountPath": path} }
	full := map[string]any{
		"securityContext": map[string]any{"runAsUser": int64(1001), "runAsGroup": int64(0), "fsGroup": int64(2000),
			"fsGroupChangePolicy": "Always", "supplementalGroups": []any{int64(3000), int64(0)}},
		"envFrom": []any{
			map[string]any{"prefix": "TLS_", "secretRef": map[string]any{"name": "tls", "optional": true}},
			map[string]any{"configMapRef": map[string]any{"name": "tuning"}},
			map[string]any{"prefix": "celld_", "configMapRef": map[string]any{"name": "x"}},
		},
		"volumes": []any{
			map[string]any{"name": "ca", "configMap": map[string]any{"name": "ca-bundle", "defaultMode": int64(0o440),
				"items": []any{map[string]any{"key": "ca.crt", "path": "certs/ca.crt", "mode": int64(0o400)}}}},
			map[string]any{"name": "creds", "secret": map[string]any{"secretName": "bucket-creds", "optional": true}},
			map[string]any{"name": "logs", "emptyDir": map[string]any{"medium": "Memory", "sizeLimit": "64Mi"}},
			vol("celldish"),
		},
		"volumeMounts": []any{mount("ca", "/etc/celld/ca"), mount("logs", "/var/log/celld"), mount("celldish", "/var/lib/celldish")},
		"sidecars": []any{map[string]any{
			"name": "shipper", "image": "example.com/shipper@sha256:" + strings.Repeat("a", 64), "imagePullPolicy": "IfNotPresent",
			"command": []any{"/ship"}, "args": []any{"--from", "/logs"},
			"env":          []any{map[string]any{"name": "DEST", "value": "x"}},
			"envFrom":      []any{map[string]any{"secretRef": map[string]any{"name": "t"}}},
			"resources":    map[string]any{"limits": map[string]any{"memory": "64Mi"}, "requests": map[string]any{"cpu": "10m"}},
			"volumeMounts": []any{mount("logs", "/logs")},
		}},
	}
	if err := try(full); err != nil {
		t.Fatalf("every member setting refused: %v", err)
	}
	for _, bad := range []struct {
		pod  map[string]any
		want string
	}{
		{map[string]any{"securityContext": map[string]any{"runAsUser": int64(0)}}, "spec.pod.securityContext.runAsUser"},
		{map[string]any{"securityContext": map[string]any{"fsGroup": int64(-1)}}, "spec.pod.securityContext.fsGroup"},
		{map[string]any{"securityContext": map[string]any{"runAsGroup": int64(1) << 31}}, "spec.pod.securityContext.runAsGroup"},
		{map[string]any{"securityContext": map[string]any{"fsGroupChangePolicy": "Never"}}, "spec.pod.securityContext.fsGroupChangePolicy"},
		{map[string]any{"securityContext": map[string]any{"supplementalGroups": []any{int64(5), int64(5)}}}, "spec.pod.securityContext.supplementalGroups[1]"},
		{map[string]any{"envFrom": []any{map[string]any{"prefix": "CELLD_X", "configMapRef": map[string]any{"name": "c"}}}}, "must not start with CELLD_"},
		{map[string]any{"envFrom": []any{map[string]any{"configMapRef": map[string]any{"name": "c"}, "secretRef": map[string]any{"name": "s"}}}}, "exactly one of secretRef and configMapRef"},
		{map[string]any{"envFrom": []any{map[string]any{"prefix": "1X", "secretRef": map[string]any{"name": "s"}}}}, "spec.pod.envFrom[0].prefix"},
		{map[string]any{"volumes": []any{vol("data")}}, "data, tmp and names starting with celld- are the operator's"},
		{map[string]any{"volumes": []any{vol("tmp")}}, "are the operator's"},
		{map[string]any{"volumes": []any{vol("celld-x")}}, "are the operator's"},
		{map[string]any{"volumes": []any{vol("Ca")}}, "spec.pod.volumes[0].name"},
		{map[string]any{"volumes": []any{vol("a"), vol("a")}}, "spec.pod.volumes[1]"},
		{map[string]any{"volumes": []any{map[string]any{"name": "a"}}}, "exactly one of configMap, secret and emptyDir"},
		{map[string]any{"volumes": []any{map[string]any{"name": "a", "emptyDir": map[string]any{}, "secret": map[string]any{"secretName": "s"}}}}, "exactly one of configMap, secret and emptyDir"},
		{map[string]any{"volumes": []any{map[string]any{"name": "a", "hostPath": map[string]any{"path": "/"}}}}, "exactly one of configMap, secret and emptyDir"},
		{map[string]any{"volumes": []any{map[string]any{"name": "a", "emptyDir": map[string]any{"medium": "HugePages"}}}}, "spec.pod.volumes[0].emptyDir.medium"},
		{map[string]any{"volumes": []any{map[string]any{"name": "a", "configMap": map[string]any{"name": "c", "defaultMode": int64(0o1777)}}}}, "spec.pod.volumes[0].configMap.defaultMode"},
		{map[string]any{"volumes": []any{map[string]any{"name": "a", "secret": map[string]any{"secretName": "s",
			"items": []any{map[string]any{"key": "k", "path": "../../etc/passwd"}}}}}}, "must not contain a '..' element"},
		{map[string]any{"volumes": []any{map[string]any{"name": "a", "secret": map[string]any{"secretName": "s",
			"items": []any{map[string]any{"key": "k", "path": "/abs"}}}}}}, "spec.pod.volumes[0].secret.items[0].path"},
		{map[string]any{"volumes": []any{vol("a")}, "volumeMounts": []any{mount("b", "/b")}}, "must name a volume of spec.pod.volumes"},
		{map[string]any{"volumeMounts": []any{mount("a", "/a")}}, "must name a volume of spec.pod.volumes"},
		{map[string]any{"volumes": []any{vol("a")}, "volumeMounts": []any{mount("a", "/var/lib/celld")}}, "are the operator's; choose another path"},
		{map[string]any{"volumes": []any{vol("a")}, "volumeMounts": []any{mount("a", "/var/lib/celld/ca")}}, "are the operator's; choose another path"},
		{map[string]any{"volumes": []any{vol("a")}, "volumeMounts": []any{mount("a", "/tmp")}}, "are the operator's; choose another path"},
		{map[string]any{"volumes": []any{vol("a")}, "volumeMounts": []any{mount("a", "/x/../tmp/y")}}, "must not contain a '..' element"},
		{map[string]any{"volumes": []any{vol("a")}, "volumeMounts": []any{mount("a", "relative")}}, "spec.pod.volumeMounts[0].mountPath"},
		{map[string]any{"volumes": []any{vol("a")}, "volumeMounts": []any{mount("a", "/a/")}}, "spec.pod.volumeMounts[0].mountPath"},
		{map[string]any{"volumes": []any{vol("a")}, "volumeMounts": []any{mount("a", "/a"), mount("a", "/a")}}, "spec.pod.volumeMounts[1]"},
		{map[string]any{"sidecars": []any{map[string]any{"name": "celld", "image": "x"}}}, "are the operator's; choose another name"},
		{map[string]any{"sidecars": []any{map[string]any{"name": "celld-agent", "image": "x"}}}, "are the operator's; choose another name"},
		{map[string]any{"sidecars": []any{map[string]any{"name": "a", "image": "x"}, map[string]any{"name": "a", "image": "y"}}}, "spec.pod.sidecars[1]"},
		{map[string]any{"sidecars": []any{map[string]any{"name": "a"}}}, "spec.pod.sidecars[0].image"},
		{map[string]any{"sidecars": []any{map[string]any{"name": "a", "image": "has space"}}}, "spec.pod.sidecars[0].image"},
		{map[string]any{"sidecars": []any{map[string]any{"name": "a", "image": "x", "resources": map[string]any{"limits": map[string]any{"memory": "lots"}}}}}, "spec.pod.sidecars[0].resources.limits"},
		{map[string]any{"sidecars": []any{map[string]any{"name": "a", "image": "x", "volumeMounts": []any{mount("data", "/data")}}}}, "a sidecar never mounts a member's data"},
		{map[string]any{"volumes": []any{vol("a")}, "sidecars": []any{map[string]any{"name": "a", "image": "x", "volumeMounts": []any{mount("a", "/tmp/x")}}}}, "are the operator's; choose another path"},
	} {
		err := try(bad.pod)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: %v; want refused saying %q", bad.pod, err, bad.want)
		}
	}
	// What the restricted level forbids has no field at all: the API server drops it (kubectl,
	// validating strictly, refuses it), so no member ever runs with it.
	for _, unknown := range []struct {
		pod  map[string]any
		path string
	}{
		{map[string]any{"securityContext": map[string]any{"runAsNonRoot": false}}, "spec.pod.securityContext.runAsNonRoot"},
		{map[string]any{"securityContext": map[string]any{"seccompProfile": map[string]any{"type": "Unconfined"}}}, "spec.pod.securityContext.seccompProfile"},
		{map[string]any{"sidecars": []any{map[string]any{"name": "a", "image": "x", "securityContext": map[string]any{"privileged": true}}}}, "spec.pod.sidecars[0].securityContext"},
		{map[string]any{"volumes": []any{map[string]any{"name": "a", "emptyDir": map[string]any{}, "hostPath": map[string]any{"path": "/"}}}}, "spec.pod.volumes[0].hostPath"},
	} {
		obj := baseFleet(v1alpha1.ProfilePersistentFleet)
		set(obj, unknown.pod, "spec", "pod")
		pruned := pruning.PruneWithOptions(obj, adm.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
		if !slices.Contains(pruned, unknown.path) {
			t.Errorf("%v: the API server would keep it (pruned %v)", unknown.pod, pruned)
		}
	}
}

// update returns the API server's refusal of obj as an update of old, nil when it would be
// stored: the transition rules (oldSelf) run only here.
func (a *admission) update(old, obj map[string]any) error {
	if err := a.admit(obj); err != nil {
		return err
	}
	defaulting.Default(old, a.structural)
	errs, _ := a.cel.Validate(context.Background(), field.NewPath(""), a.structural, obj, old, celconfig.RuntimeCELCostBudget)
	if len(errs) > 0 {
		return errs.ToAggregate()
	}
	return nil
}

// TestStorageUpdateAdmission: spec.storage.size may grow, in any unit, and never shrink, in any
// unit; its class never changes; each refusal names the field and says why.
func TestStorageUpdateAdmission(t *testing.T) {
	adm := loadAdmission(t, "celld.io_celldfleets.yaml")
	try := func(class, size string) error {
		old, obj := baseFleet(v1alpha1.ProfilePersistentFleet), baseFleet(v1alpha1.ProfilePersistentFleet)
		set(obj, map[string]any{"storageClassName": class, "size": size}, "spec", "storage")
		return adm.update(old, obj)
	}
	for _, size := range []string{"1Gi", "1024Mi", "1073741824", "2Gi", "1025Mi", "1.5Gi", "1Ti"} {
		if err := try("standard", size); err != nil {
			t.Errorf("size 1Gi -> %s refused: %v", size, err)
		}
	}
	for _, size := range []string{"1023Mi", "1G", "512Mi", "1073741823", "0.99Gi"} {
		err := try("standard", size)
		if err == nil || !strings.Contains(err.Error(), "spec.storage.size must not shrink below 1Gi") {
			t.Errorf("size 1Gi -> %s: %v; want a refusal that names spec.storage.size and the size it may not go below", size, err)
		}
	}
	if err := try("fast", "1Gi"); err == nil || !strings.Contains(err.Error(), "spec.storage.storageClassName is immutable") {
		t.Errorf("class standard -> fast: %v; want a refusal that names spec.storage.storageClassName", err)
	}
	old, obj := baseFleet(v1alpha1.ProfilePersistentFleet), baseFleet(v1alpha1.ProfilePersistentFleet)
	delete(obj["spec"].(map[string]any), "storage")
	if err := adm.update(old, obj); err == nil || !strings.Contains(err.Error(), "spec.storage") {
		t.Errorf("storage removed: %v; want a refusal that names spec.storage", err)
	}
}
