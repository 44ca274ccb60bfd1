package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/machine"
	"github.com/celld/celld-operator/proptest/harness"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = mainArgs(args, &o, &e)
	return code, o.String(), e.String()
}

func TestDiagramShowsEveryState(t *testing.T) {
	for _, format := range []string{"dot", "mermaid"} {
		code, out, errOut := runCLI("diagram", "--format", format)
		if code != 0 {
			t.Fatalf("diagram --format %s: exit %d: %s", format, code, errOut)
		}
		for _, s := range machine.States {
			if !strings.Contains(out, string(s)) {
				t.Errorf("diagram --format %s lacks state %s", format, s)
			}
		}
	}
}

func writeFleet(t *testing.T, f *v1alpha1.CelldFleet) string {
	t.Helper()
	data, err := yaml.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRenderBothProfiles(t *testing.T) {
	for _, s := range []harness.FleetSpec{
		{Name: "p", Profile: v1alpha1.ProfilePersistentFleet, Members: 3, Bucket: "p-bucket"},
		{Name: "b", Profile: v1alpha1.ProfileBucket, Members: 2, Bucket: "b-bucket"},
		{Name: "o", Profile: v1alpha1.ProfileBucket, Members: 2, Bucket: "o-bucket", Workload: v1alpha1.WorkloadOrderedStatefulSet},
	} {
		code, out, errOut := runCLI("render", "-f", writeFleet(t, harness.NewFleet(s)))
		if code != 0 {
			t.Fatalf("render %s: exit %d: %s", s.Name, code, errOut)
		}
		kinds := map[string]int{}
		for _, doc := range strings.Split(out, "---\n")[1:] {
			var obj struct {
				Kind string `json:"kind"`
			}
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				t.Fatalf("render %s: not YAML: %v\n%s", s.Name, err, doc)
			}
			kinds[obj.Kind]++
		}
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

func TestBadInputIsOneClearLine(t *testing.T) {
	bad := harness.NewFleet(harness.FleetSpec{Name: "x", Profile: v1alpha1.ProfilePersistentFleet, Members: 3, Bucket: "x-bucket"})
	bad.Spec.Storage = nil
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"render"}, "-f is required"},
		{[]string{"render", "-f", "/does/not/exist.yaml"}, "no such file"},
		{[]string{"render", "-f", writeFleet(t, bad)}, "spec.storage is required"},
		{[]string{"diagram", "--format", "svg"}, "want dot or mermaid"},
		{[]string{"nope"}, "unknown command"},
		{[]string{"run", "--kube-api-qps", "0"}, "--kube-api-qps 0, --kube-api-burst 50: want both positive"},
		{[]string{"run", "--kube-api-burst", "0"}, "--kube-api-qps 20, --kube-api-burst 0: want both positive"},
	} {
		code, _, errOut := runCLI(tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want a non-zero exit and one line containing %q", tc.args, code, errOut, tc.want)
		}
	}
}
