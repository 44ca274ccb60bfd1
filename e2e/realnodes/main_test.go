package realnodes

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/celld/celld-operator/api/generated/clientset/versioned"
	"github.com/celld/celld-operator/e2e/testenv"
)

// The images the suite builds and imports into every node, and the operator's release.
const (
	celldImageV1 = "celld.local/celld:v1"
	celldImageV2 = "celld.local/celld:v2"
	shipperImage = "celld.local/shipper:v1"
	operatorRepo = "ghcr.io/celld/celld-operator"
	operatorNS   = "celld-system"
)

// operatorVersion is the release the suite writes with make release's own program: a version of
// its own each run, so that an operator installed by an earlier run, whose image had another
// content under the same tag, is replaced rather than kept.
var operatorVersion = fmt.Sprintf("v0.0.0-real.%d", time.Now().Unix())

var suite struct {
	root       string
	cp         *testenv.ControlPlane
	kubeconfig string
	run        string // the real mode's state folder: nodes/N/disks hold the claims' folders
	bin        string
	kube       kubernetes.Interface
	celld      versioned.Interface
	release    string // the release folder: chart, OCI archive
	// bucketEndpoint is the object store Bucket fleets keep their data in: celld-bucket, on this
	// machine, at the address the nodes' Pods reach the host on.
	bucketEndpoint string
}

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "realnodes: "+format+"\n", args...)
}

// realEnv is this process's environment for the real mode: the kwok mode's ports and paths, if a
// caller exported them, would point the scripts at the other control plane.
func realEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "CLUSTER_MODE", "CLUSTER_RUN", "KUBECONFIG", "ETCD_CLIENT_PORT", "ETCD_PEER_PORT", "APISERVER_PORT",
			"CONTROLLER_MANAGER_PORT", "SCHEDULER_PORT":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "CLUSTER_MODE=real")
}

func runSuite(m *testing.M) int {
	start := time.Now()
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "realnodes: FAIL: "+format+"\n", args...)
		fmt.Fprintln(os.Stderr, "realnodes: the real-node tests need root and cluster/real.sh; see cluster/README.md")
		return 1
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		return fail("repository root: %v", err)
	}
	suite.root = root
	cp, err := testenv.NewControlPlane(root, realEnv(), os.Stderr)
	if err != nil {
		return fail("%v", err)
	}
	suite.cp = cp
	vars, err := cp.Vars("CLUSTER_RUN", "CLUSTER_BIN", "REAL_HOST_IP")
	if err != nil {
		return fail("cluster/env.sh: %v", err)
	}
	suite.run, suite.bin = vars[0], vars[1]
	suite.bucketEndpoint = "http://" + net.JoinHostPort(vars[2], "28900")
	clusterDNS(vars[2])
	wasUp := cp.Answers()
	if !wasUp && os.Getenv("E2E_KEEP_CLUSTER") == "" {
		// A cluster this suite starts starts empty. The state a previous run left (its etcd:
		// the operator's release, Pods on images the nodes no longer hold, Nodes as they were
		// shut down) made the release's upgrade wait past its timeout for a Pod the scheduler
		// had set aside.
		logf("deleting the state a previous real-node cluster left (cluster/real.sh down --purge)")
		if _, err := cp.Script("real.sh", "down", "--purge"); err != nil {
			return fail("cluster/real.sh down --purge: %v", err)
		}
	}
	logf("starting the real-node cluster (cluster/real.sh up; it builds what is missing)")
	out, err := cp.Script("real.sh", "up")
	if err != nil {
		return fail("cluster/real.sh up: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	suite.kubeconfig = strings.TrimSpace(lines[len(lines)-1])
	cp.Kubeconfig = suite.kubeconfig
	if !wasUp && os.Getenv("E2E_KEEP_CLUSTER") == "" {
		defer func() {
			logf("stopping the real-node cluster this suite started (cluster/real.sh down)")
			if _, err := cp.Script("real.sh", "down"); err != nil {
				fmt.Fprintf(os.Stderr, "realnodes: %v\n", err)
			}
		}()
	}
	if err := cp.InstallCRDs(context.Background()); err != nil {
		return fail("%v", err)
	}
	work, err := os.MkdirTemp("", "celld-realnodes-")
	if err != nil {
		return fail("temp dir: %v", err)
	}
	defer os.RemoveAll(work)
	if err := buildImages(work); err != nil {
		return fail("%v", err)
	}
	stopBucket, err := startBucket(work)
	if err != nil {
		return fail("%v", err)
	}
	defer stopBucket()
	cfg, err := clientcmd.BuildConfigFromFlags("", suite.kubeconfig)
	if err != nil {
		return fail("kubeconfig: %v", err)
	}
	if suite.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return fail("client: %v", err)
	}
	if suite.celld, err = versioned.NewForConfig(cfg); err != nil {
		return fail("celld client: %v", err)
	}
	if err := installOperator(context.Background()); err != nil {
		return fail("%v", err)
	}
	logf("ready after %s; running the tests", time.Since(start).Round(time.Second))
	code := m.Run()
	logf("done after %s", time.Since(start).Round(time.Second))
	return code
}

func command(dir string, env []string, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// buildImages builds the celld stand-in's two images (the second only tells itself apart, as a
// new release would), the operator's release (its OCI archive and chart, by make release's own
// program), and imports them into every node.
func buildImages(work string) error {
	logf("building the celld images and the operator's release")
	celld := filepath.Join(work, "celld")
	if err := command(suite.root, []string{"CGO_ENABLED=0"}, "go", "build", "-trimpath", "-o", celld, "./cmd/celld"); err != nil {
		return err
	}
	v1, v2 := filepath.Join(work, "celld-v1.tar"), filepath.Join(work, "celld-v2.tar")
	for _, img := range []struct{ out, ref, build string }{{v1, celldImageV1, "v1"}, {v2, celldImageV2, "v2"}} {
		if err := command(suite.root, nil, "go", "run", "./hack/image", "-o", img.out, "-ref", img.ref,
			"-entrypoint", "/celld", "-user", "65532:65532", "-env", "CELLD_BUILD="+img.build, celld+"=/celld"); err != nil {
			return err
		}
	}
	// The sidecar of TestMemberPodSettings.
	shipper, shipperTar := filepath.Join(work, "shipper"), filepath.Join(work, "shipper.tar")
	if err := command(suite.root, []string{"CGO_ENABLED=0"}, "go", "build", "-trimpath", "-o", shipper, "./e2e/realnodes/shipper"); err != nil {
		return err
	}
	if err := command(suite.root, nil, "go", "run", "./hack/image", "-o", shipperTar, "-ref", shipperImage,
		"-entrypoint", "/shipper", "-user", "65532:65532", shipper+"=/shipper"); err != nil {
		return err
	}
	suite.release = filepath.Join(work, "release")
	if err := command(suite.root, nil, filepath.Join("cluster", "tools.sh"), "helm", "cyclonedx-gomod"); err != nil {
		return err
	}
	// The nodes run linux/amd64: the release's other platforms are TestReleaseInstall's to build.
	if err := command(suite.root, nil, "go", "run", "./hack/release", "-version", operatorVersion,
		"-platforms", "amd64", "-plugin-systems", "linux", "-out", suite.release); err != nil {
		return err
	}
	oci := filepath.Join(suite.release, "celld-operator-"+operatorVersion+".oci.tar")
	if _, err := suite.cp.Script("real.sh", "import", v1, v2, shipperTar); err != nil {
		return fmt.Errorf("importing the celld images: %w", err)
	}
	if _, err := suite.cp.Script("real.sh", "import-oci", operatorRepo, oci); err != nil {
		return fmt.Errorf("importing the operator's image: %w", err)
	}
	return nil
}

// startBucket runs celld-bucket, the Bucket fleets' object store, until the returned stop.
func startBucket(work string) (func(), error) {
	bin := filepath.Join(work, "celld-bucket")
	if err := command(suite.root, []string{"CGO_ENABLED=0"}, "go", "build", "-o", bin, "./cmd/celld-bucket"); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--dir", filepath.Join(work, "buckets"), "--listen", strings.TrimPrefix(suite.bucketEndpoint, "http://"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("celld-bucket: %w", err)
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if resp, err := http.Get(suite.bucketEndpoint + "/healthz"); err == nil {
			resp.Body.Close()
			return stop, nil
		}
	}
	stop()
	return nil, fmt.Errorf("celld-bucket did not answer on %s", suite.bucketEndpoint)
}
