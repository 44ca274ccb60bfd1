package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/celld/celld-operator/api/v1alpha1"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files of kubectl celld's output")

var plugin struct {
	once sync.Once
	dir  string
	err  error
}

// kubectlCelld runs `kubectl celld ARGS` the way a user does: kubectl finds the plugin binary,
// built from this tree, on the PATH.
func (f *fixture) kubectlCelld(args ...string) (string, string, error) {
	f.t.Helper()
	plugin.once.Do(func() {
		plugin.dir, plugin.err = os.MkdirTemp("", "kubectl-celld-")
		if plugin.err != nil {
			return
		}
		build := exec.Command("go", "build", "-o", filepath.Join(plugin.dir, "kubectl-celld"), "./cmd/kubectl-celld")
		build.Dir = suite.root
		if out, err := build.CombinedOutput(); err != nil {
			plugin.err = errors.New(string(out))
		}
	})
	if plugin.err != nil {
		f.t.Fatalf("go build ./cmd/kubectl-celld: %v", plugin.err)
	}
	var out, stderr bytes.Buffer
	cmd := exec.CommandContext(context.Background(), filepath.Join(suite.cp.Bin, "kubectl"),
		append([]string{"celld"}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+plugin.dir+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+suite.kubeconfig)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	return out.String(), stderr.String(), err
}

// normalized replaces what differs from run to run (namespace, ids, UIDs, times, ages, nodes,
// zones, revisions) with fixed words, and column padding with two spaces (a column's width
// follows its longest value).
func (f *fixture) normalized(out string, fleets ...string) string {
	out = strings.ReplaceAll(out, f.ns, "NAMESPACE")
	out = strings.ReplaceAll(out, f.id, "ID")
	for _, fl := range fleets {
		out = regexp.MustCompile(`\b`+regexp.QuoteMeta(fl)+`-[a-z0-9]{5,}\b`).ReplaceAllString(out, fl+"-REVISION")
	}
	for _, r := range []struct{ re, with string }{
		{`celld-bucket-[0-9a-f]{64}`, "celld-bucket-HASH"},
		{`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`, "UID"},
		{`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`, "TIME"},
		{`\bnode-\d+\b`, "NODE"},
		{`\bzone-[a-z]\b`, "ZONE"},
		{`\b\d+[smhdy](\d+[smh])?\b`, "AGE"},
		{`<invalid>`, "AGE"},
		{` {2,}`, "  "},
		{` +\n`, "\n"},
	} {
		out = regexp.MustCompile(r.re).ReplaceAllString(out, r.with)
	}
	return out
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join(suite.root, "e2e", "testdata", "kubectl-celld", name+".golden")
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./e2e -run %s -update writes it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("kubectl celld %s changed; review, then go test ./e2e -run %s -update:\n--- got\n%s\n--- want\n%s", name, t.Name(), got, want)
	}
}

// What a user reads in a terminal, against real objects: a fleet grown from 3 to 4 members, its
// status (conditions, members with their nodes, zones, revisions and disks, the reservation and
// the latest capacity decisions) and its whole history; the plugin's errors name what is wrong
// and how to find the right name, with kubectl's exit statuses.
func TestKubectlCelld(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.startOperator()
	fl := f.newFleet("shown", v1alpha1.ProfilePersistentFleet, 3)
	fl = f.create(fl)
	f.waitConverged(fl.Name)
	f.update(fl.Name, func(fl *v1alpha1.CelldFleet) { fl.Spec.Members = 4 })
	fl = f.waitConverged(fl.Name)
	if len(f.members(fl)) != 4 {
		t.Fatalf("%d members after growing to 4", len(f.members(fl)))
	}

	out, stderr, err := f.kubectlCelld("status", fl.Name, "-n", f.ns)
	if err != nil {
		t.Fatalf("kubectl celld status: %v: %s", err, stderr)
	}
	t.Logf("kubectl celld status %s:\n%s", fl.Name, out)
	// Each member once, on a node that exists, ready, with its own disk and its size.
	for _, p := range f.members(fl) {
		line := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(p.Name) + `  +` + regexp.QuoteMeta(p.Spec.NodeName) + `  +zone-[a-z]  +true  +\S+  +data-` + regexp.QuoteMeta(p.Name) + `  +1Gi  +\S+$`)
		if !line.MatchString(out) {
			t.Errorf("no member line for %s on %s, ready, disk data-%s of 1Gi", p.Name, p.Spec.NodeName, p.Name)
		}
	}
	golden(t, "status", f.normalized(out, fl.Name))

	// The same facts as data: the members the API server shows, each ready on its node, with
	// its own disk bound.
	out, stderr, err = f.kubectlCelld("status", fl.Name, "-n", f.ns, "-o", "json")
	if err != nil {
		t.Fatalf("kubectl celld status -o json: %v: %s", err, stderr)
	}
	var doc struct {
		Fleet struct {
			Metadata struct{ UID string }
		}
		Members []struct {
			Pod, Node, Zone string
			Ready           bool
			Disks           []struct{ Claim, Phase string }
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("kubectl celld status -o json is not JSON: %v\n%s", err, out)
	}
	want := map[string]string{}
	for _, p := range f.members(fl) {
		want[p.Name] = p.Spec.NodeName
	}
	if doc.Fleet.Metadata.UID != string(fl.UID) || len(doc.Members) != len(want) {
		t.Errorf("-o json: fleet UID %q, %d members; want %q and %d", doc.Fleet.Metadata.UID, len(doc.Members), fl.UID, len(want))
	}
	for _, m := range doc.Members {
		if node, ok := want[m.Pod]; !ok || m.Node != node || !m.Ready || !strings.HasPrefix(m.Zone, "zone-") ||
			len(m.Disks) != 1 || m.Disks[0].Claim != "data-"+m.Pod || m.Disks[0].Phase != "Bound" {
			t.Errorf("-o json member %+v; want %s on %s, ready, in a zone, its disk data-%s Bound", m, m.Pod, node, m.Pod)
		}
	}

	out, stderr, err = f.kubectlCelld("history", fl.Name, "-n", f.ns)
	if err != nil {
		t.Fatalf("kubectl celld history: %v: %s", err, stderr)
	}
	golden(t, "history", f.normalized(out, fl.Name))

	for _, c := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"a fleet that does not exist", []string{"status", "nope", "-n", f.ns}, 1, `celldfleet "nope" not found in namespace "` + f.ns + `" (kubectl get celldfleets -n ` + f.ns + ` lists them)`},
		{"no fleet named", []string{"status", "-n", f.ns}, 2, "kubectl celld status takes one fleet name, got 0 arguments"},
		{"an unknown flag", []string{"history", fl.Name, "--colour"}, 2, "unknown flag: --colour"},
	} {
		out, stderr, err := f.kubectlCelld(c.args...)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != c.code || !strings.Contains(stderr, c.stderr) {
			t.Errorf("%s: kubectl celld %s: %v, stdout %q, stderr %q; want exit %d and %q", c.name, strings.Join(c.args, " "), err, out, stderr, c.code, c.stderr)
		}
	}
	out, _, err = f.kubectlCelld("status", "--help")
	if err != nil || !strings.Contains(out, "kubectl celld status FLEET") {
		t.Errorf("kubectl celld status --help: %v: %s", err, out)
	}
}
