package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/celld/celld-operator/e2e/celldstore/load"
)

// The test binary is celld itself when asked, so members run as processes that can be killed.
func TestMain(m *testing.M) {
	if os.Getenv("CELLD_TEST_RUN_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

type proc struct {
	name, dir    string
	client, peer int
	cmd          *exec.Cmd
	log          lockedBuffer
}

// lockedBuffer is read while the process writes to it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (p *proc) start(t *testing.T, peers string) {
	t.Helper()
	p.cmd = exec.Command(os.Args[0], "-test.run=^$")
	p.cmd.Env = append(os.Environ(), "CELLD_TEST_RUN_MAIN=1",
		"CELLD_DURABILITY=fleet", "CELLD_FLEET_NAME=f", "CELLD_FLEET_UID=uid-1", "CELLD_MEMBER_NAME="+p.name,
		"CELLD_CLIENT_PORT="+fmt.Sprint(p.client), "CELLD_PEER_PORT="+fmt.Sprint(p.peer),
		"CELLD_PEERS="+peers, "CELLD_DATA_DIR="+p.dir, "CELLD_SYNC_INTERVAL=50ms")
	p.log = lockedBuffer{}
	p.cmd.Stderr = &p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
}

func (p *proc) addr() string { return fmt.Sprintf("127.0.0.1:%d", p.client) }

func waitReady(t *testing.T, ps ...*proc) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for _, p := range ps {
		for {
			resp, err := http.Get("http://" + p.addr() + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not ready: %v\n%s", p.name, err, p.log.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// Three celld processes; one is killed outright (SIGKILL) while writes flow and comes back on its
// own disk; another stops on SIGTERM. Nothing acknowledged is lost, and the logs are zerolog
// lines naming the member and the fleet.
func TestProcessesKilledOneAtATimeLoseNothing(t *testing.T) {
	var ps []*proc
	var peers []string
	for i := range 3 {
		p := &proc{name: fmt.Sprintf("f-%d", i), dir: t.TempDir(), client: freePort(t), peer: freePort(t)}
		ps = append(ps, p)
		peers = append(peers, fmt.Sprintf("127.0.0.1:%d", p.peer))
	}
	for _, p := range ps {
		p.start(t, strings.Join(peers, ","))
	}
	t.Cleanup(func() {
		for _, p := range ps {
			if p.cmd.ProcessState == nil {
				_ = p.cmd.Process.Kill()
				_ = p.cmd.Wait()
			}
		}
	})
	waitReady(t, ps...)

	journal := filepath.Join(t.TempDir(), "journal")
	ctx, cancel := context.WithCancel(context.Background())
	acks := make(chan struct{}, 1000)
	done := make(chan error)
	go func() {
		_, err := load.Write(ctx, load.WriteConfig{Members: []string{ps[0].addr(), ps[1].addr(), ps[2].addr()}, Journal: journal, Rate: 300,
			OnAck: func(load.Record) {
				select {
				case acks <- struct{}{}:
				default:
				}
			}})
		done <- err
	}()
	waitAcks := func(n int) {
		for range n {
			select {
			case <-acks:
			case <-time.After(10 * time.Second):
				t.Fatal("writes stopped being acknowledged")
			}
		}
	}
	waitAcks(50)
	if err := ps[2].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = ps[2].cmd.Wait()
	waitReady(t, ps[0], ps[1])
	waitAcks(30)
	ps[2].start(t, strings.Join(peers, ","))
	waitReady(t, ps...)
	waitAcks(30)

	if err := ps[1].cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := ps[1].cmd.Wait(); err != nil {
		t.Errorf("celld on SIGTERM: %v", err)
	}
	waitReady(t, ps[0], ps[2])
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ps[1].start(t, strings.Join(peers, ","))
	waitReady(t, ps...)

	rep, err := load.Check(context.Background(), load.CheckConfig{Journal: journal, Members: []string{ps[0].addr(), ps[1].addr(), ps[2].addr()}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Checked < 110 || len(rep.Lost) > 0 {
		t.Fatalf("%s", rep)
	}
	for _, want := range []string{`"member":"f-1"`, `"fleet":"f"`, `"message":"caught up"`} {
		if !strings.Contains(ps[1].log.String(), want) {
			t.Errorf("f-1's log has no %s:\n%s", want, ps[1].log.String())
		}
	}
}

func TestBadEnvironmentExits2(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "CELLD_TEST_RUN_MAIN=1", "CELLD_DURABILITY=disk", "CELLD_MEMBER_NAME=m")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !bytes.Contains(out, []byte("CELLD_DURABILITY")) {
		t.Fatalf("%v\n%s", err, out)
	}
}
