// Package testenv is what the end-to-end tests and the benchmark share: the local control plane
// through cluster/'s scripts, and the operator as a process (start it on free loopback ports,
// wait until it is ready, scrape its metrics, stop it).
package testenv

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Operator is one celld-operator process, started and stopped by its own PID.
type Operator struct {
	Cmd *exec.Cmd
	// Metrics is the host:port of /metrics (and /debug/pprof with --pprof); Probe of /readyz.
	Metrics, Probe string
	LogPath        string
	// Exited is closed once the process has exited and its log is closed.
	Exited chan struct{}
}

// Options say how to start the operator.
type Options struct {
	Binary  string
	LogPath string
	// Args come after "run" and the loopback flags: a later flag overrides an earlier one.
	Args []string
	// DieWithParent kills the operator with the process that started it: a test binary killed by
	// -timeout or ^C runs no cleanup.
	DieWithParent bool
	// Ready is how long the operator has to answer /readyz; Poll how often it is asked.
	Ready, Poll time.Duration
}

// FreeAddrs finds n free loopback addresses. Their listeners stay open until all are known, or
// a later one could be an earlier one again.
func FreeAddrs(n int) ([]string, error) {
	var out []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		defer l.Close()
		out = append(out, l.Addr().String())
	}
	return out, nil
}

// Launch runs `celld-operator run` without leader election, with JSON logs to LogPath and plain
// HTTP metrics on a loopback address. It does not wait for readiness.
func Launch(o Options) (*Operator, error) {
	addrs, err := FreeAddrs(2)
	if err != nil {
		return nil, err
	}
	op := &Operator{Metrics: addrs[0], Probe: addrs[1], LogPath: o.LogPath, Exited: make(chan struct{})}
	args := append([]string{"run",
		"--metrics-bind-address", op.Metrics, "--health-probe-bind-address", op.Probe,
		"--leader-elect=false", "--log-format", "json", "--log-level", "info",
		// Plain HTTP on a loopback address: the callers read /metrics many times; the default
		// (a token checked with the API server) has a test of its own.
		"--metrics-secure=false",
	}, o.Args...)
	if err := os.MkdirAll(filepath.Dir(o.LogPath), 0o755); err != nil {
		return nil, err
	}
	logFile, err := os.Create(o.LogPath)
	if err != nil {
		return nil, fmt.Errorf("operator log: %w", err)
	}
	op.Cmd = exec.Command(o.Binary, args...)
	op.Cmd.Stdout, op.Cmd.Stderr = logFile, logFile
	if o.DieWithParent {
		op.Cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	}
	if err := op.Cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start operator: %w", err)
	}
	go func() {
		_ = op.Cmd.Wait()
		logFile.Close()
		close(op.Exited)
	}()
	return op, nil
}

// Start launches the operator and waits until it is ready. onStart, when set, sees the process as
// soon as it runs (to stop it whatever happens next). A process that does not become ready is
// stopped.
func Start(ctx context.Context, o Options, onStart func(*Operator)) (*Operator, error) {
	op, err := Launch(o)
	if err != nil {
		return nil, err
	}
	if onStart != nil {
		onStart(op)
	}
	if err := op.AwaitReady(ctx, o.Ready, o.Poll); err != nil {
		_ = op.Stop()
		return nil, fmt.Errorf("operator not ready: %w (log %s)", err, op.LogPath)
	}
	return op, nil
}

// Ready asks /readyz once.
func (op *Operator) Ready() bool {
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + op.Probe + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// AwaitReady polls /readyz until it answers OK, the process exits, or timeout passes.
func (op *Operator) AwaitReady(ctx context.Context, timeout, poll time.Duration) error {
	return wait.PollUntilContextTimeout(ctx, poll, timeout, true, func(context.Context) (bool, error) {
		select {
		case <-op.Exited:
			return false, fmt.Errorf("operator exited: %s", op.Cmd.ProcessState)
		default:
		}
		return op.Ready(), nil
	})
}

// Stop sends SIGTERM and waits for the exit, killing the process after 30 s. It reports an exit
// that was not clean; a process that had already exited reports nothing.
func (op *Operator) Stop() error {
	select {
	case <-op.Exited:
		return nil
	default:
	}
	_ = op.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-op.Exited:
		if !op.Cmd.ProcessState.Success() {
			return fmt.Errorf("operator pid %d exited with %s after SIGTERM", op.Cmd.Process.Pid, op.Cmd.ProcessState)
		}
		return nil
	case <-time.After(30 * time.Second):
		op.Kill()
		return fmt.Errorf("operator pid %d still running 30s after SIGTERM: killed", op.Cmd.Process.Pid)
	}
}

// LogOffset is the current size of the operator's log: with a later one, it delimits the lines
// a window wrote.
func (op *Operator) LogOffset() int64 {
	st, err := os.Stat(op.LogPath)
	if err != nil {
		return 0
	}
	return st.Size()
}

// Kill is a crash: SIGKILL, no chance to release anything.
func (op *Operator) Kill() {
	_ = op.Cmd.Process.Signal(syscall.SIGKILL)
	<-op.Exited
}

var httpc = &http.Client{Timeout: 30 * time.Second}

// Get reads a path of the metrics address.
func (op *Operator) Get(path string) ([]byte, error) {
	resp, err := httpc.Get("http://" + op.Metrics + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}

// Scrape reads and parses /metrics.
func (op *Operator) Scrape() (Metrics, error) {
	body, err := op.Get("/metrics")
	if err != nil {
		return nil, err
	}
	return ParseMetrics(strings.NewReader(string(body)))
}
