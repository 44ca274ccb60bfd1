package testenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// ControlPlane is the local control plane of cluster/, driven through its scripts with one
// environment: the end-to-end tests use the default cache and ports, the benchmark a cache and
// ports of its own, and both go through the same scripts the same way.
type ControlPlane struct {
	// Root is the repository's root.
	Root string
	// Env is the scripts' environment (CLUSTER_CACHE, the ports); nil is this process's.
	Env []string
	// Log receives the scripts' progress as it happens; nil discards it.
	Log io.Writer
	// Bin holds the control plane's binaries, kubectl among them.
	Bin string
	// Kubeconfig is the admin kubeconfig: where cluster/env.sh says it is written, and, once Up
	// returned, where cluster/up.sh says it wrote it.
	Kubeconfig string
}

// NewControlPlane reads where the binaries and the kubeconfig are as cluster/env.sh sets them
// under env, so every path follows the same overrides as the scripts.
func NewControlPlane(root string, env []string, log io.Writer) (*ControlPlane, error) {
	c := &ControlPlane{Root: root, Env: env, Log: log}
	vars, err := c.Vars("CLUSTER_BIN", "KUBECONFIG")
	if err != nil {
		return nil, fmt.Errorf("cluster/env.sh: %w", err)
	}
	c.Bin, c.Kubeconfig = vars[0], vars[1]
	return c, nil
}

func (c *ControlPlane) log() io.Writer {
	if c.Log == nil {
		return io.Discard
	}
	return c.Log
}

// Vars are the values cluster/env.sh gives these variables, in order.
func (c *ControlPlane) Vars(names ...string) ([]string, error) {
	var sb strings.Builder
	sb.WriteString(`. cluster/env.sh && printf '%s\n'`)
	for _, n := range names {
		sb.WriteString(` "$` + n + `"`)
	}
	cmd := exec.Command("bash", "-c", sb.String())
	cmd.Dir, cmd.Env = c.Root, c.Env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	vals := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(vals) != len(names) {
		return nil, fmt.Errorf("want %d values, got %q", len(names), out)
	}
	return vals, nil
}

// Script runs cluster/<name> with the control plane's environment; its progress goes to Log as
// it happens, and its stdout is returned.
func (c *ControlPlane) Script(name string, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := exec.Command(filepath.Join(c.Root, "cluster", name), args...)
	cmd.Dir, cmd.Env = c.Root, c.Env
	// The command copies its stdout and its stderr in two goroutines: Log sees one write at a time.
	log := &lockedWriter{w: c.log()}
	cmd.Stdout = io.MultiWriter(&out, log)
	cmd.Stderr = log
	err := cmd.Run()
	return out.String(), err
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Up starts what is not running yet (cluster/up.sh is idempotent) and takes the kubeconfig from
// the last line it prints.
func (c *ControlPlane) Up() error {
	out, err := c.Script("up.sh")
	if err != nil {
		return fmt.Errorf("cluster/up.sh: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	kubeconfig := strings.TrimSpace(lines[len(lines)-1])
	if _, err := os.Stat(kubeconfig); err != nil {
		return fmt.Errorf("cluster/up.sh did not end with the kubeconfig's path: %w", err)
	}
	c.Kubeconfig = kubeconfig
	return nil
}

// Down stops the control plane (cluster/down.sh, with --purge its state too).
func (c *ControlPlane) Down(args ...string) error {
	if _, err := c.Script("down.sh", args...); err != nil {
		return fmt.Errorf("cluster/down.sh %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// Answers reports whether an API server answers on Kubeconfig right now: someone else's control
// plane (make demo, a developer's shell) is left as it was found.
func (c *ControlPlane) Answers() bool {
	if _, err := os.Stat(c.Kubeconfig); err != nil {
		return false
	}
	cmd := exec.Command(filepath.Join(c.Bin, "kubectl"), "--kubeconfig", c.Kubeconfig, "--request-timeout=3s", "get", "--raw", "/readyz")
	return cmd.Run() == nil
}

// Kubectl runs the control plane's kubectl on the admin kubeconfig and returns its stdout; an
// error carries its stderr.
func (c *ControlPlane) Kubectl(ctx context.Context, args ...string) (string, error) {
	var out, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(c.Bin, "kubectl"), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out.String(), nil
}

// InstallCRDs applies the CRDs of deploy/crds and waits until the API server serves them.
func (c *ControlPlane) InstallCRDs(ctx context.Context) error {
	if _, err := c.Kubectl(ctx, "apply", "--server-side", "--force-conflicts", "-f", filepath.Join(c.Root, "deploy", "crds")); err != nil {
		return fmt.Errorf("installing the CRDs: %w", err)
	}
	return c.waitEstablished(ctx, 60*time.Second, "celldfleets.celld.io", "celldreservations.celld.io")
}

// waitEstablished polls until every named CRD has Established=True. kubectl wait is not used:
// it fails at once ("accessor error") on a CRD whose status has no conditions yet, which is how
// the API server first stores a CRD just applied.
func (c *ControlPlane) waitEstablished(ctx context.Context, timeout time.Duration, names ...string) error {
	deadline := time.Now().Add(timeout)
	for _, name := range names {
		for {
			out, err := c.Kubectl(ctx, "get", "crd", name, "-o", `jsonpath={.status.conditions[?(@.type=="Established")].status}`)
			if err == nil && strings.TrimSpace(out) == "True" {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("CRD %s not established after %s: Established=%q, %v", name, timeout, strings.TrimSpace(out), err)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("CRD %s not established: %w", name, ctx.Err())
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
	return nil
}
