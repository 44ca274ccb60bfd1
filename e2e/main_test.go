package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/celld/celld-operator/api/generated/clientset/versioned"
	"github.com/celld/celld-operator/e2e/testenv"
)

// suite is what TestMain prepared for every test.
var suite struct {
	root       string                // repository root
	cp         *testenv.ControlPlane // the local control plane, through cluster/'s scripts
	kubeconfig string                // admin kubeconfig written by cluster/up.sh
	operator   string                // celld-operator built from this tree
	logDir     string                // operator logs, kept after the run
	auditLog   string                // the API server's record of Pod and claim deletes (cluster/up.sh)
	kube       kubernetes.Interface
	celld      versioned.Interface
}

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	start := time.Now()
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "e2e: FAIL: "+format+"\n", args...)
		fmt.Fprintln(os.Stderr, "e2e: the end-to-end tests need the local control plane and the operator binary; see cluster/README.md")
		return 1
	}
	root, err := filepath.Abs("..")
	if err != nil {
		return fail("repository root: %v", err)
	}
	suite.root = root
	// Scripts' progress goes to stderr as it happens.
	cp, err := testenv.NewControlPlane(root, nil, os.Stderr)
	if err != nil {
		return fail("%v", err)
	}
	suite.cp = cp
	// Someone else's control plane (make demo, a developer's shell) is left as it was found.
	wasUp := cp.Answers()

	logf("building the control plane if needed (cluster/build.sh; about 8 minutes cold)")
	if _, err := cp.Script("build.sh"); err != nil {
		return fail("cluster/build.sh: %v", err)
	}
	if !wasUp && os.Getenv("E2E_KEEP_CLUSTER") == "" {
		defer func() {
			logf("stopping the control plane this suite started (cluster/down.sh)")
			if err := cp.Down(); err != nil {
				fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
			}
		}()
	}
	logf("starting the control plane (cluster/up.sh)")
	if err := cp.Up(); err != nil {
		return fail("%v", err)
	}
	suite.kubeconfig = cp.Kubeconfig
	run, err := cp.Vars("CLUSTER_RUN")
	if err != nil {
		return fail("cluster/env.sh: %v", err)
	}
	suite.auditLog = filepath.Join(run[0], "logs", "audit.log")

	// A control plane kept from make demo may hold deploy/'s reservation policy, under which only
	// the operator's ServiceAccount writes reservations: the suite's operators run as the admin,
	// and the tests that need the policy bind it themselves.
	if out, err := kubectlCmd(context.Background(), "delete", "--ignore-not-found", "validatingadmissionpolicybinding", "celld-reservations-operator-only"); err != nil {
		return fail("removing a left-over reservation policy binding: %v", err)
	} else if strings.Contains(out, "deleted") {
		logf("removed the reservation policy binding a demo left behind")
	}
	logf("installing the CRDs of deploy/crds")
	if err := cp.InstallCRDs(context.Background()); err != nil {
		return fail("%v", err)
	}

	binDir, err := os.MkdirTemp("", "celld-e2e-")
	if err != nil {
		return fail("temp dir: %v", err)
	}
	defer os.RemoveAll(binDir)
	suite.operator = filepath.Join(binDir, "celld-operator")
	// The test build: -tags faults compiles in the fault injection TestAPIFaults uses, which the
	// production binary lacks.
	logf("building the operator (go build -tags faults ./cmd/celld-operator)")
	build := exec.Command("go", "build", "-tags", "faults", "-o", suite.operator, "./cmd/celld-operator")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return fail("go build -tags faults ./cmd/celld-operator: %v\n%s", err, out)
	}
	suite.logDir = filepath.Join(root, ".cache", "e2e", "logs")
	if err := os.MkdirAll(suite.logDir, 0o755); err != nil {
		return fail("log dir: %v", err)
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", suite.kubeconfig)
	if err != nil {
		return fail("kubeconfig: %v", err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	if suite.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return fail("client: %v", err)
	}
	if suite.celld, err = versioned.NewForConfig(cfg); err != nil {
		return fail("celld client: %v", err)
	}
	sweep(context.Background())
	logf("ready after %s; running the tests", time.Since(start).Round(time.Second))
	code := m.Run()
	logf("done after %s", time.Since(start).Round(time.Second))
	return code
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "e2e: "+format+"\n", args...)
}

// kubectlCmd runs the control plane's kubectl on the admin kubeconfig.
func kubectlCmd(ctx context.Context, args ...string) (string, error) {
	return suite.cp.Kubectl(ctx, args...)
}

// sweep removes what interrupted runs left behind (a test binary killed by -timeout or ^C runs no
// cleanup): this suite's namespaces older than any run can last, whose fleets no operator will
// ever release.
func sweep(ctx context.Context) {
	l, err := suite.kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: testLabel + "=true"})
	if err != nil {
		logf("sweep: %v", err)
		return
	}
	for _, ns := range l.Items {
		if time.Since(ns.CreationTimestamp.Time) < 90*time.Minute {
			continue
		}
		fleets, err := suite.celld.CelldV1alpha1().CelldFleets(ns.Name).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, fl := range fleets.Items {
			_, _ = suite.celld.CelldV1alpha1().CelldFleets(ns.Name).Patch(ctx, fl.Name, types.MergePatchType,
				[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		}
		if ns.DeletionTimestamp == nil {
			_ = suite.kube.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
		}
		logf("swept namespace %s, left by an interrupted run", ns.Name)
	}
}
