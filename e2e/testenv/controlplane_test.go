package testenv

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeRoot is a repository with a cluster/ of stand-in scripts: env.sh as the real one sets its
// paths (under CLUSTER_CACHE), an up.sh that prints progress on stderr and the kubeconfig's path
// last (or a path that does not exist under UP_LIES), and a kubectl that echoes its arguments
// and fails, saying why on stderr, when asked to.
func fakeRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"cluster/env.sh": `CLUSTER_CACHE="${CLUSTER_CACHE:-$PWD/.cache/cluster}"
CLUSTER_BIN="${CLUSTER_CACHE}/bin"
KUBECONFIG="${CLUSTER_CACHE}/run/kubeconfig"
`,
		"cluster/up.sh": `#!/usr/bin/env bash
. cluster/env.sh
echo "[cluster] starting" >&2
mkdir -p "$(dirname "$KUBECONFIG")" && touch "$KUBECONFIG"
echo "[cluster] ready"
if [ -n "$UP_LIES" ]; then echo /nowhere/kubeconfig; else echo "$KUBECONFIG"; fi
`,
		"cluster/down.sh": `#!/usr/bin/env bash
echo "down $*" >&2
[ "$1" != "--fail" ]
`,
		"bin/kubectl": `#!/usr/bin/env bash
for a in "$@"; do [ "$a" = fail ] && { echo "no such thing" >&2; exit 1; }; done
echo "$@"
`,
	}
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestControlPlaneFollowsTheEnvironment(t *testing.T) {
	root := fakeRoot(t)
	cache := filepath.Join(root, "other-cache")
	env := append(os.Environ(), "CLUSTER_CACHE="+cache)
	var log bytes.Buffer
	c, err := NewControlPlane(root, env, &log)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(cache, "bin"); c.Bin != want {
		t.Errorf("Bin = %s, want %s", c.Bin, want)
	}
	if want := filepath.Join(cache, "run", "kubeconfig"); c.Kubeconfig != want {
		t.Errorf("Kubeconfig = %s, want %s", c.Kubeconfig, want)
	}
	if c.Answers() {
		t.Errorf("Answers() with no kubeconfig written yet: want false")
	}
	if err := c.Up(); err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(cache, "run", "kubeconfig"); c.Kubeconfig != want {
		t.Errorf("after Up, Kubeconfig = %s, want %s (up.sh's last line)", c.Kubeconfig, want)
	}
	if !strings.Contains(log.String(), "[cluster] starting") || !strings.Contains(log.String(), "[cluster] ready") {
		t.Errorf("the script's stderr and stdout go to Log as they come, got %q", log.String())
	}
}

func TestControlPlaneUpRefusesAPathThatIsNotThere(t *testing.T) {
	root := fakeRoot(t)
	c, err := NewControlPlane(root, append(os.Environ(), "UP_LIES=1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	before := c.Kubeconfig
	if err := c.Up(); err == nil || !strings.Contains(err.Error(), "kubeconfig") {
		t.Fatalf("Up with a last line naming no file: err = %v, want one about the kubeconfig", err)
	}
	if c.Kubeconfig != before {
		t.Errorf("a failed Up changed Kubeconfig to %s", c.Kubeconfig)
	}
}

func TestControlPlaneKubectlAndDown(t *testing.T) {
	root := fakeRoot(t)
	c := &ControlPlane{Root: root, Bin: filepath.Join(root, "bin"), Kubeconfig: "/k/config"}
	out, err := c.Kubectl(context.Background(), "get", "pods")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(out), "--kubeconfig /k/config get pods"; got != want {
		t.Errorf("kubectl ran with %q, want %q", got, want)
	}
	if _, err := c.Kubectl(context.Background(), "get", "fail"); err == nil || !strings.Contains(err.Error(), "no such thing") {
		t.Errorf("a failing kubectl: err = %v, want its stderr in it", err)
	}
	if c.Answers() {
		t.Errorf("Answers() with a kubeconfig that does not exist: want false")
	}
	c.Kubeconfig = filepath.Join(root, "bin", "kubectl") // any file that exists
	if !c.Answers() {
		t.Errorf("Answers() when kubectl get --raw /readyz succeeds: want true")
	}
	if err := c.Down("--purge"); err != nil {
		t.Errorf("Down: %v", err)
	}
	if err := c.Down("--fail"); err == nil || !strings.Contains(err.Error(), "cluster/down.sh --fail") {
		t.Errorf("a failing down.sh: err = %v, want it named with its arguments", err)
	}
}

// TestWaitEstablishedPollsUntilTrue: a CRD first read with no conditions (kubectl prints nothing)
// is read again until Established is True; one that never is fails the wait, named.
func TestWaitEstablishedPollsUntilTrue(t *testing.T) {
	root := t.TempDir()
	// Three reads of each CRD answer nothing, then "True"; slow.celld.io never does.
	kubectl := `#!/usr/bin/env bash
name="$5"; n=$(cat "` + root + `/$name" 2>/dev/null || echo 0); echo $((n+1)) > "` + root + `/$name"
[ "$name" = slow.celld.io ] && exit 0
[ "$n" -ge 3 ] && printf True
exit 0
`
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "kubectl"), []byte(kubectl), 0o755); err != nil {
		t.Fatal(err)
	}
	c := &ControlPlane{Root: root, Bin: filepath.Join(root, "bin"), Kubeconfig: "/k/config"}
	ctx := context.Background()
	if err := c.waitEstablished(ctx, 10*time.Second, "a.celld.io", "b.celld.io"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a.celld.io", "b.celld.io"} {
		if b, _ := os.ReadFile(filepath.Join(root, name)); strings.TrimSpace(string(b)) != "4" {
			t.Errorf("%s read %s times, want 4 (three without conditions, then True)", name, b)
		}
	}
	err := c.waitEstablished(ctx, 600*time.Millisecond, "slow.celld.io")
	if err == nil || !strings.Contains(err.Error(), "CRD slow.celld.io not established") {
		t.Errorf("a CRD never established: %v", err)
	}
}
