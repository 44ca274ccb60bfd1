package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

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

// oneLine: stderr holds exactly one line.
func oneLine(s string) bool {
	return strings.HasSuffix(s, "\n") && strings.Count(s, "\n") == 1
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

// TestHelpNeverRunsTheCommand: -h and --help print the help on stdout and exit 0, whatever else
// the command line holds, and the command does not run (no diagram, no rendered object, no
// operator start).
func TestHelpNeverRunsTheCommand(t *testing.T) {
	fleet := writeFleet(t, goodFleet("h", v1alpha1.ProfileBucket))
	for _, tc := range []struct {
		args    []string
		want    string // in the help
		notWant string // output of the command itself
	}{
		{[]string{"-h"}, "Available Commands:", "version:"},
		{[]string{"--help"}, "Available Commands:", "version:"},
		{[]string{"help"}, "Available Commands:", "version:"},
		{[]string{"help", "render"}, "--filename", "---"},
		{[]string{"version", "-h"}, "celld-operator version", "go:"},
		{[]string{"diagram", "-h"}, "--format", "digraph"},
		{[]string{"diagram", "--help", "--format", "mermaid"}, "--format", "stateDiagram"},
		{[]string{"diagram", "--format", "svg", "-h"}, "--format", "want dot or mermaid"},
		{[]string{"render", "-h"}, "--namespace", "kind:"},
		{[]string{"render", "-f", fleet, "-h"}, "--filename", "kind:"},
		{[]string{"run", "-h"}, "--kube-api-qps", `"level"`},
		{[]string{"run", "--help", "--kubeconfig", "/does/not/exist"}, "--leader-elect", "kubeconfig /does/not/exist"},
		{[]string{"run", "--kube-api-qps", "0", "-h"}, "--metrics-bind-address", "want both positive"},
		{[]string{"completion", "-h"}, "bash", "#"},
	} {
		code, out, errOut := runCLI(tc.args...)
		if code != 0 || errOut != "" {
			t.Errorf("%v: exit %d, stderr %q; want 0 and nothing", tc.args, code, errOut)
		}
		if !strings.Contains(out, "Usage:") || !strings.Contains(out, tc.want) {
			t.Errorf("%v: stdout lacks the help (%q):\n%s", tc.args, tc.want, out)
		}
		if strings.Contains(out, tc.notWant) {
			t.Errorf("%v: stdout has %q: the command ran:\n%s", tc.args, tc.notWant, out)
		}
	}
}

// TestBadInputIsOneClearLine: every failure is one line on stderr that says what to do, nothing
// on stdout, exit 2 for a command line that cannot run and 1 for a command that failed.
func TestBadInputIsOneClearLine(t *testing.T) {
	bad := goodFleet("x", v1alpha1.ProfilePersistentFleet)
	bad.Spec.Storage = nil
	good := writeFleet(t, goodFleet("g", v1alpha1.ProfileBucket))
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		// Usage errors.
		{nil, 2, "name a command: completion, diagram, render, run, selftest, version"},
		{[]string{"nope"}, 2, `unknown command "nope"`},
		{[]string{"rendr"}, 2, "did you mean render?"},
		{[]string{"--nope"}, 2, "unknown flag: --nope"},
		{[]string{"version", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"completion"}, 2, "name a shell: bash, fish, powershell, zsh"},
		{[]string{"completion", "tcsh"}, 2, `unknown shell "tcsh"`},
		{[]string{"completion", "bash", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"render"}, 2, "-f is required"},
		{[]string{"render", "-f"}, 2, "flag needs an argument: 'f' in -f"},
		{[]string{"render", "-f", good, "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"render", "-f", good, "--format", "dot"}, 2, "unknown flag: --format"},
		{[]string{"diagram", "--format", "svg"}, 2, `--format "svg": want dot or mermaid`},
		{[]string{"diagram", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"diagram", "-format", "dot"}, 2, "-format: a long flag takes two dashes: --format"},
		{[]string{"run", "--kube-api-qps", "0"}, 2, "--kube-api-qps 0, --kube-api-burst 200: want both positive"},
		{[]string{"run", "--kube-api-burst", "0"}, 2, "--kube-api-qps 100, --kube-api-burst 0: want both positive"},
		{[]string{"run", "--kube-api-qps", "fast"}, 2, `invalid argument "fast" for "--kube-api-qps" flag`},
		{[]string{"run", "--resync-period", "soon"}, 2, `invalid argument "soon" for "--resync-period" flag`},
		{[]string{"run", "--leader-elect=maybe"}, 2, `invalid argument "maybe" for "--leader-elect" flag`},
		{[]string{"run", "--workers", "0"}, 2, "--workers 0: want at least 1"},
		{[]string{"run", "--moving-client-limit", "never"}, 2, `--moving-client-limit "never": want auto or always`},
		{[]string{"run", "--log-format", "xml"}, 2, `--log-format "xml": want json or console`},
		{[]string{"run", "--log-level", "loud"}, 2, `--log-level "loud": want debug, info, warn or error`},
		{[]string{"run", "--metrics-secure=false", "--metrics-cert-dir", "/tmp"}, 2, "--metrics-cert-dir needs --metrics-secure"},
		{[]string{"run", "--leader-elect", "--leader-election-renew-deadline", "1m"}, 2, "lease duration > renew deadline"},
		{[]string{"run", "-kubeconfig", "/k"}, 2, "-kubeconfig: a long flag takes two dashes: --kubeconfig"},
		{[]string{"run", "extra"}, 2, `unexpected argument "extra"`},
		// Runtime failures.
		{[]string{"render", "-f", "/does/not/exist.yaml"}, 1, "no such file"},
		{[]string{"render", "-f", writeFleet(t, bad)}, 1, "spec.storage is required when spec.profile is PersistentFleet"},
		{[]string{"render", "-f", good, "-n", "elsewhere"}, 1, `the namespace from the provided object "` + harness.Namespace + `" does not match the namespace "elsewhere"`},
		{[]string{"run", "--kubeconfig", "/does/not/exist"}, 1, "kubeconfig /does/not/exist"},
	} {
		code, out, errOut := runCLI(tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) || !oneLine(errOut) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and one line on stderr containing %q", tc.args, code, out, errOut, tc.code, tc.want)
		}
	}
}

// TestVersion: version and --version print the version, the commit, the build date and the Go
// version.
func TestVersion(t *testing.T) {
	saved := [3]string{version, commit, date}
	t.Cleanup(func() { version, commit, date = saved[0], saved[1], saved[2] })
	version, commit, date = "v1.2.3", "0123456789abcdef", "2026-01-02T03:04:05Z"
	want := "version: v1.2.3\ncommit:  0123456789abcdef\ndate:    2026-01-02T03:04:05Z\ngo:      " + runtime.Version() + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, errOut := runCLI(args...)
		if code != 0 || out != want || errOut != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 0 and %q", args, code, out, errOut, want)
		}
	}
}

// TestVersionFallsBackToTheToolchain: without -X main.commit, the commit and its time are what
// go build recorded from version control.
func TestVersionFallsBackToTheToolchain(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "feedface"}, {Key: "vcs.time", Value: "2026-05-06T07:08:09Z"}}
	modified := append(append([]debug.BuildSetting{}, vcs...), debug.BuildSetting{Key: "vcs.modified", Value: "true"})
	for _, tc := range []struct {
		name                 string
		commit, date         string
		settings             []debug.BuildSetting
		wantCommit, wantDate string
	}{
		{"stamped", "abc", "2026-01-01T00:00:00Z", vcs, "abc", "2026-01-01T00:00:00Z"},
		{"stamped commit only", "abc", "", vcs, "abc", "unknown"},
		{"from vcs", "", "", vcs, "feedface", "2026-05-06T07:08:09Z (commit time)"},
		{"from vcs, stamped date", "", "2026-01-01T00:00:00Z", vcs, "feedface", "2026-01-01T00:00:00Z"},
		{"from vcs, modified", "", "", modified, "feedface (modified)", "2026-05-06T07:08:09Z (commit time)"},
		{"nothing recorded", "", "", nil, "unknown", "unknown"},
	} {
		b := resolveBuild("v1", tc.commit, tc.date, "go1.x", tc.settings)
		if b.commit != tc.wantCommit || b.date != tc.wantDate || b.version != "v1" || b.goVersion != "go1.x" {
			t.Errorf("%s: got %+v; want commit %q, date %q", tc.name, b, tc.wantCommit, tc.wantDate)
		}
	}
}

// TestCompletion: cobra's completion scripts, and completion of the flags' values.
func TestCompletion(t *testing.T) {
	for shell, want := range map[string]string{"bash": "complete -o default -F __start_celld-operator celld-operator", "zsh": "#compdef celld-operator", "fish": "complete -c celld-operator", "powershell": "Register-ArgumentCompleter"} {
		code, out, errOut := runCLI("completion", shell)
		if code != 0 || errOut != "" || !strings.Contains(out, want) {
			t.Errorf("completion %s: exit %d, stderr %q, script has %q: %t", shell, code, errOut, want, strings.Contains(out, want))
		}
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", ""}, []string{"completion", "diagram", "render", "run", "version"}},
		{[]string{"__complete", "diagram", "--format", ""}, []string{"dot", "mermaid"}},
		{[]string{"__complete", "run", "--log-format", ""}, []string{"json", "console"}},
	} {
		code, out, _ := runCLI(tc.args...)
		for _, w := range tc.want {
			if code != 0 || !strings.Contains(out, w+"\n") && !strings.Contains(out, w+"\t") {
				t.Errorf("%v: exit %d, completions %q lack %q", tc.args, code, out, w)
			}
		}
	}
}

// goodFleet is a fleet the API server admits.
func goodFleet(name string, p v1alpha1.Profile) *v1alpha1.CelldFleet {
	return harness.NewFleet(harness.FleetSpec{Name: name, Profile: p, Members: 3, Bucket: name + "-bucket", Grace: 5 * time.Minute})
}

func writeFleet(t *testing.T, f *v1alpha1.CelldFleet) string {
	t.Helper()
	data, err := yaml.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, string(data))
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
