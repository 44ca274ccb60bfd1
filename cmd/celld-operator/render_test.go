package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/proptest/harness"
)

// docs splits render's output into its objects.
func docs(t *testing.T, out string) []map[string]any {
	t.Helper()
	var objs []map[string]any
	for _, doc := range strings.Split(out, "---\n")[1:] {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("not YAML: %v\n%s", err, doc)
		}
		objs = append(objs, obj)
	}
	return objs
}

func kindsOf(objs []map[string]any) map[string]int {
	n := map[string]int{}
	for _, o := range objs {
		n[o["kind"].(string)]++
	}
	return n
}

func TestRenderBothProfiles(t *testing.T) {
	for _, s := range []harness.FleetSpec{
		{Name: "p", Profile: v1alpha1.ProfilePersistentFleet, Members: 3, Bucket: "p-bucket"},
		{Name: "b", Profile: v1alpha1.ProfileBucket, Members: 2, Bucket: "b-bucket"},
		{Name: "o", Profile: v1alpha1.ProfileBucket, Members: 2, Bucket: "o-bucket", Workload: v1alpha1.WorkloadOrderedStatefulSet},
	} {
		s.Grace = 300e9
		code, out, errOut := runCLI("render", "-f", writeFleet(t, harness.NewFleet(s)))
		if code != 0 {
			t.Fatalf("render %s: exit %d: %s", s.Name, code, errOut)
		}
		kinds := kindsOf(docs(t, out))
		want := map[string]int{"CelldReservation": 1, "Service": 2, "NetworkPolicy": 2, "PodDisruptionBudget": 1}
		if s.Profile == v1alpha1.ProfilePersistentFleet || s.Workload == v1alpha1.WorkloadOrderedStatefulSet {
			want["StatefulSet"] = 1
		} else {
			want["Deployment"] = 1
		}
		for k, n := range want {
			if kinds[k] != n {
				t.Errorf("render %s: %d %s, want %d (all: %v)", s.Name, kinds[k], k, n, kinds)
			}
		}
		if strings.Contains(out, "initContainers") || strings.Count(out, "image: ") != 1 {
			t.Errorf("render %s: members must run the one image the user names and nothing else", s.Name)
		}
	}
}

// TestRenderShippedSamples: the samples deploy/ ships render.
func TestRenderShippedSamples(t *testing.T) {
	for _, f := range []string{"../../deploy/samples/bucket-fleet.yaml", "../../deploy/samples/persistent-fleet.yaml"} {
		if code, out, errOut := runCLI("render", "-f", f); code != 0 || len(docs(t, out)) < 6 {
			t.Errorf("render -f %s: exit %d, %d objects: %s", f, code, len(docs(t, out)), errOut)
		}
	}
}

const fleetYAML = `apiVersion: celld.io/v1alpha1
kind: CelldFleet
metadata:
  name: %s%s
spec:
  profile: Bucket
  members: 2
  image: ghcr.io/celld/celld:1.0
  bucket:
    name: %s-bucket
    region: us-east-1
`

func manifest(name, extraMeta string) string {
	return fmt.Sprintf(fleetYAML, name, extraMeta, name)
}

// TestRenderEveryDocument: every CelldFleet of a multi-document file renders, in order, each with
// its own stand-in UID; empty documents and comments are skipped.
func TestRenderEveryDocument(t *testing.T) {
	file := writeFile(t, "# two fleets\n---\n"+manifest("a", "")+"---\n# nothing here\n---\n"+manifest("b", ""))
	code, out, errOut := runCLI("render", "-f", file)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	objs := docs(t, out)
	if k := kindsOf(objs); k["CelldReservation"] != 2 || k["Deployment"] != 2 || k["Service"] != 4 {
		t.Errorf("rendered %v; want both fleets' objects", k)
	}
	if first := objs[0]["spec"].(map[string]any)["fleetName"]; first != "a" {
		t.Errorf("first object is of fleet %v; want the file's order, a first", first)
	}
	for i, name := range []string{"a", "b"} {
		line := fmt.Sprintf("# uid 00000000-0000-0000-0000-%012d stands in for the one the API server assigns to CelldFleet default/%s; owner references point at it\n", i, name)
		if !strings.HasPrefix(strings.SplitN(out, "---\n", 2)[0], "# uid") || !strings.Contains(out, line) {
			t.Errorf("output lacks, at the top, %q:\n%s", line, out[:min(len(out), 400)])
		}
	}
}

// TestRenderRefusesWholeFiles: a document that is not a CelldFleet, or a fleet the API server
// would refuse, refuses the file: nothing on stdout, exit 1, each refusal naming the document.
func TestRenderRefusesWholeFiles(t *testing.T) {
	configMap := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n"
	for _, tc := range []struct {
		name, content string
		want          []string // the lines of stderr
	}{
		{"another kind", manifest("a", "") + "---\n" + configMap, []string{
			`: document 2: a ConfigMap (apiVersion "v1"), not a CelldFleet: render takes kind CelldFleet, apiVersion celld.io/v1alpha1 only`}},
		{"another version", strings.Replace(manifest("a", ""), "v1alpha1", "v1beta1", 1), []string{
			`: document 1: a CelldFleet (apiVersion "celld.io/v1beta1"), not a CelldFleet`}},
		{"no kind", "just: text\n", []string{`: document 1: an object without a kind (apiVersion ""), not a CelldFleet`}},
		{"a list", "- a\n- b\n", []string{": document 1: not a Kubernetes object but a list"}},
		{"no fleet", "# nothing\n", []string{"has no CelldFleet"}},
		{"the same fleet twice", manifest("a", "") + "---\n" + manifest("a", ""), []string{": document 2: CelldFleet default/a is also document 1"}},
		{"duplicate key", manifest("a", "\n  name: b"), []string{`: document 1: yaml: unmarshal errors: line 5: key "name" already set in map`}},
		{"two bad documents", configMap + "---\n" + manifest("a-peers", ""), []string{
			": document 1: a ConfigMap", `: document 2: The CelldFleet "a-peers" is invalid: <nil>: Invalid value: metadata.name must not end in -peers or -clients`}},
	} {
		refusedWith(t, tc.name, tc.content, tc.want)
	}
}

// TestRenderChecksAsTheAPIServer: a fleet is refused with the API server's own words (field path
// and message), from the CRD the binary ships: schema, CEL rules, unknown fields, object meta.
func TestRenderChecksAsTheAPIServer(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		want          []string
	}{
		{"schema bound", strings.Replace(manifest("a", ""), "members: 2", "members: 0", 1), []string{
			`The CelldFleet "a" is invalid: spec.members: Invalid value: 0: spec.members in body should be greater than or equal to 1`}},
		{"CEL rule", strings.Replace(manifest("a", ""), "profile: Bucket", "profile: PersistentFleet", 1), []string{
			`The CelldFleet "a" is invalid: spec: Invalid value: spec.storage is required when spec.profile is PersistentFleet: set storageClassName and size`}},
		{"staged rollout on a Deployment", strings.Replace(manifest("a", ""), "members: 2", "members: 2\n  rollout:\n    canary: 1", 1), []string{
			`The CelldFleet "a" is invalid: spec: Invalid value: spec.rollout needs a StatefulSet to hold a rollout at`}},
		{"staged rollout on an ordered StatefulSet", strings.Replace(manifest("a", ""), "members: 2", "members: 2\n  workload: OrderedStatefulSet\n  rollout:\n    canary: 0", 1), []string{
			`The CelldFleet "a" is invalid: spec.rollout.canary: Invalid value: 0: spec.rollout.canary in body should be greater than or equal to 1`}},
		{"enum", strings.Replace(manifest("a", ""), "profile: Bucket", "profile: Cloud", 1), []string{
			`The CelldFleet "a" is invalid (2 errors):`, `* spec.profile: Unsupported value: "Cloud": supported values: "Bucket", "PersistentFleet"`,
			"* <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"}},
		{"type", strings.Replace(manifest("a", ""), "members: 2", "members: two", 1), []string{
			`The CelldFleet "a" is invalid (2 errors):`, `* spec.members: Invalid value: "string": spec.members in body must be of type integer: "string"`, "* <nil>: Invalid value: null: some validation rules were not checked"}},
		{"required", strings.Replace(manifest("a", ""), "  image: ghcr.io/celld/celld:1.0\n", "", 1), []string{
			`The CelldFleet "a" is invalid (2 errors):`, "* spec.image: Required value", "* <nil>: Invalid value: null: some validation rules were not checked"}},
		{"unknown fields", strings.Replace(manifest("a", "\n  colour: blue"), "members: 2", "members: 2\n  replicas: 2", 1), []string{
			`The CelldFleet "a" is invalid (2 errors):`, `* unknown field "metadata.colour"`, `* unknown field "spec.replicas"`}},
		{"object meta", manifest("a", "\n  labels:\n    bad key: x"), []string{
			`The CelldFleet "a" is invalid: metadata.labels: Invalid value: "bad key": name part must consist of alphanumeric characters`}},
		{"no name", strings.Replace(manifest("a", ""), "name: a\n", "generateName: a-\n", 1), []string{
			"metadata.name: Required value: render needs the fleet's name"}},
	} {
		refusedWith(t, tc.name, tc.content, tc.want)
	}
}

// TestRenderAppliesTheSchemaDefaults: the fleet rendered is the one the API server would store,
// defaults filled in from the CRD.
func TestRenderAppliesTheSchemaDefaults(t *testing.T) {
	m := strings.Replace(manifest("a", ""), "members: 2", "members: 2\n  capacity: {}\n  network: {}", 1)
	fleets, err := readFleets("fleet.yaml", []byte(m), "")
	if err != nil {
		t.Fatal(err)
	}
	s := fleets[0].Spec
	if s.Capacity.Mode != v1alpha1.CapacityManual {
		t.Errorf("spec.capacity %+v: want the schema's default mode, Manual", s.Capacity)
	}
	if s.Network.ClientPort != 7000 || s.Network.PeerPort != 7001 {
		t.Errorf("spec.network %+v: want the schema's default ports 7000 and 7001", s.Network)
	}
}

// TestRenderNamespace: -n/--namespace places a fleet whose manifest names no namespace, and
// refuses one that names another, as kubectl does.
func TestRenderNamespace(t *testing.T) {
	for _, tc := range []struct {
		name, meta string
		args       []string
		want       string // namespace of the objects, or the error
	}{
		{"none", "", nil, "default"},
		{"-n", "", []string{"-n", "team"}, "team"},
		{"--namespace", "", []string{"--namespace", "team"}, "team"},
		{"manifest", "\n  namespace: team", nil, "team"},
		{"both agree", "\n  namespace: team", []string{"-n", "team"}, "team"},
		{"both differ", "\n  namespace: a", []string{"-n", "b"},
			`: document 1: the namespace from the provided object "a" does not match the namespace "b". You must pass '--namespace=a' to perform this operation.`},
		{"invalid", "", []string{"-n", "Team_1"}, `metadata.namespace: Invalid value: "Team_1"`},
	} {
		args := append([]string{"render", "-f", writeFile(t, manifest("a", tc.meta))}, tc.args...)
		code, out, errOut := runCLI(args...)
		if strings.Contains(tc.want, " ") {
			if code != 1 || !strings.Contains(errOut, tc.want) || !oneLine(errOut) {
				t.Errorf("%s: exit %d, stderr %q; want exit 1 and %q", tc.name, code, errOut, tc.want)
			}
			continue
		}
		if code != 0 {
			t.Errorf("%s: exit %d: %s", tc.name, code, errOut)
			continue
		}
		for _, o := range docs(t, out) {
			if ns := o["metadata"].(map[string]any)["namespace"]; ns != tc.want {
				t.Errorf("%s: %s in namespace %v; want %s", tc.name, o["kind"], ns, tc.want)
			}
		}
	}
}

// TestRenderStandInUID: a manifest without a UID renders with a stand-in the output names at the
// top; one with a UID (read back from a cluster) renders with it, and no comment.
func TestRenderStandInUID(t *testing.T) {
	const uid = "6b8f2c1e-0d3a-4f5e-9a7b-1c2d3e4f5a6b"
	code, out, errOut := runCLI("render", "-f", writeFile(t, manifest("a", "\n  uid: "+uid)))
	if code != 0 || strings.HasPrefix(out, "#") || !strings.Contains(out, "uid: "+uid) || strings.Contains(out, "00000000-") {
		t.Errorf("with a UID: exit %d (%s); want no comment and owner references to %s:\n%s", code, errOut, uid, out)
	}
	code, out, errOut = runCLI("render", "-f", writeFile(t, manifest("a", "")))
	first, _, _ := strings.Cut(out, "\n")
	if code != 0 || first != "# uid 00000000-0000-0000-0000-000000000000 stands in for the one the API server assigns to CelldFleet default/a; owner references point at it" ||
		!strings.Contains(out, "uid: 00000000-0000-0000-0000-000000000000") {
		t.Errorf("without a UID: exit %d (%s), first line %q", code, errOut, first)
	}
}

// TestRenderReadsStdin: -f - reads the manifest from the standard input.
func TestRenderReadsStdin(t *testing.T) {
	var o, e bytes.Buffer
	code := execute([]string{"render", "-f", "-"}, strings.NewReader(manifest("a", "")), &o, &e)
	if code != 0 || kindsOf(docs(t, o.String()))["CelldReservation"] != 1 {
		t.Errorf("render -f -: exit %d, stderr %q, stdout:\n%s", code, e.String(), o.String())
	}
	code = execute([]string{"render", "-f", "-"}, strings.NewReader("kind: Pod\napiVersion: v1\n"), &o, &e)
	if code != 1 || !strings.Contains(e.String(), "stdin: document 1: a Pod") {
		t.Errorf("render -f - of a Pod: exit %d, stderr %q", code, e.String())
	}
}

// TestAdmissionRefusesEveryDerivedSuffix: every suffix an owned kind of kinds.Table adds to the
// fleet's name is refused at the end of a fleet's name by the CRD's rule, or fleets "x" and
// "x<suffix>" would both render the object of that name. A kind with a new suffix fails here
// until the rule in api/v1alpha1 names it.
func TestAdmissionRefusesEveryDerivedSuffix(t *testing.T) {
	for _, s := range kinds.DerivedSuffixes {
		code, out, errOut := runCLI("render", "-f", writeFile(t, manifest("a"+s, "")))
		if code != 1 || out != "" || !strings.Contains(errOut, "metadata.name must not end in") {
			t.Errorf("fleet a%s: exit %d, stderr %q; want the name refused", s, code, errOut)
		}
	}
}

// refusedWith renders content and wants exit 1, nothing rendered, and stderr's lines to contain
// want, line by line.
func refusedWith(t *testing.T, name, content string, want []string) {
	t.Helper()
	code, out, errOut := runCLI("render", "-f", writeFile(t, content))
	lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
	if code != 1 || out != "" || len(lines) != len(want) {
		t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 1, nothing on stdout, %d lines", name, code, out, errOut, len(want))
		return
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("%s: stderr line %d %q lacks %q", name, i+1, lines[i], w)
		}
	}
}

// A staged fleet's partition depends on what the cluster runs, which render does not read: the
// output says what its partition 0 stands for and where a change holds; an unstaged fleet's
// output says nothing of it.
func TestRenderSaysWhereAStagedRolloutHolds(t *testing.T) {
	staged := harness.NewFleet(harness.FleetSpec{Name: "s", Profile: v1alpha1.ProfilePersistentFleet, Members: 5, Bucket: "s-bucket", Grace: 300e9})
	staged.Spec.Rollout = &v1alpha1.RolloutSpec{Canary: 2}
	code, out, errOut := runCLI("render", "-f", writeFleet(t, staged))
	if code != 0 {
		t.Fatalf("render: exit %d: %s", code, errOut)
	}
	head, _, _ := strings.Cut(out, "---\n")
	want := "held at partition 3 (members 3 and up updated first) until kubectl celld rollout approve s"
	if !strings.Contains(head, want) {
		t.Errorf("render of a fleet with spec.rollout.canary 2 of 5: the header does not say %q:\n%s", want, head)
	}
	// No rollout, or a canary of the fleet's size (which holds nothing): nothing to say.
	for _, r := range []*v1alpha1.RolloutSpec{nil, {Canary: 5}} {
		staged.Spec.Rollout = r
		code, out, errOut = runCLI("render", "-f", writeFleet(t, staged))
		if code != 0 {
			t.Fatalf("render: exit %d: %s", code, errOut)
		}
		if head, _, _ := strings.Cut(out, "---\n"); strings.Contains(head, "partition") {
			t.Errorf("render of a fleet with spec.rollout %+v speaks of partitions:\n%s", r, out)
		}
	}
}
