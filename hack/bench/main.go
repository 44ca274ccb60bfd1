// Command bench measures the operator against the floor Kubernetes sets on its own, on a control
// plane of its own, and writes one table to docs/benchmarks.md. `make bench` runs it.
//
//	go run ./hack/bench                  # quick mode: 50 fleets
//	BENCH_FLEETS=500 go run ./hack/bench # long mode
//	go run ./hack/bench -h               # every flag
//
// What it measures, in order (docs/performance.md):
//  1. core: the machine's Go benchmarks (machine/bench_test.go), decisions/s and allocations;
//  2. overhead: N fleets created at once through the operator against the same N sets of
//     objects created directly with no operator, alternating, repeated;
//  3. scale-in: N fleets shrinking 6 -> 3 at once, the total and the operator's decision latency;
//  4. writes: at rest through full resyncs, by the operator's counter and the API server's, and
//     per fleet over a whole lifecycle;
//  5. memory: the operator's heap and RSS at several fleet counts, against what its caches hold;
//  6. the event-to-action histogram of the overhead runs;
//  7. their CPU profile;
//  8. scale (long mode, or -only scale): 2,000 converged fleets at rest with the operator's
//     default flags, memory per fleet, and a restart: time to every fleet decided, writes after it.
//
// docs/benchmarks.md holds the quick mode's table and the long mode's, each between markers of
// its own (mergePart): a run replaces its mode's part and keeps the other's.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/celld/celld-operator/api/v1alpha1"
)

type ports struct {
	apiserver, etcdClient, etcdPeer, controllerManager, scheduler, kwok, metricsServer int
}

type config struct {
	fleets          int
	repeats         int
	memLevels       []int
	restWindow      time.Duration
	resync          time.Duration
	lifecycleFleets int
	scaleFleets     int
	scaleMembers    int
	scaleProfile    string
	scaleWindow     time.Duration
	nodes           int
	coreCount       int
	coreBenchtime   string
	out             string
	only            map[string]bool
	workDir         string // .cache/bench: operator binary, logs, profiles
	clusterCache    string
	ports           ports
	keep            bool
	// operatorFlags are added to every operator the bench starts, before a phase's own.
	operatorFlags []string
}

type bench struct {
	root        string
	cfg         config
	cl          *cluster
	log         io.Writer
	operatorBin string

	mu  sync.Mutex
	ops []*operator
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.log, "bench: %s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func (b *bench) running(op *operator) {
	b.mu.Lock()
	b.ops = append(b.ops, op)
	b.mu.Unlock()
}

// stopOperators stops every operator process this run started, by its own PID.
func (b *bench) stopOperators() {
	b.mu.Lock()
	ops := b.ops
	b.mu.Unlock()
	for _, op := range ops {
		op.stop()
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func main() {
	root, err := os.Getwd()
	if err != nil {
		fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		fatal(fmt.Errorf("run from the repository root (make bench): %w", err))
	}
	var c config
	var only, levels string
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	fs.IntVar(&c.fleets, "fleets", envInt("BENCH_FLEETS", 50), "fleets per run (quick mode 50; BENCH_FLEETS=500 for the long mode)")
	fs.IntVar(&c.repeats, "repeats", envInt("BENCH_REPEATS", 3), "operator and raw runs each, alternating")
	fs.StringVar(&levels, "memory-levels", "", "fleet counts the memory is read at (default 0,N,2N up to N=100, else 0,100,N)")
	fs.DurationVar(&c.restWindow, "rest-window", time.Minute, "how long writes at rest are counted")
	fs.DurationVar(&c.resync, "resync", 20*time.Second, "the operator's --resync-period while writes at rest are counted")
	fs.IntVar(&c.lifecycleFleets, "lifecycle-fleets", 5, "fleets walked through a whole lifecycle to count its writes")
	fs.IntVar(&c.scaleFleets, "scale-fleets", 2000, "fleets of the scale phase (run by the long mode, or -only scale)")
	fs.IntVar(&c.scaleMembers, "scale-members", 1, "members per fleet of the scale phase")
	fs.StringVar(&c.scaleProfile, "scale-profile", string(v1alpha1.ProfilePersistentFleet), "profile of the scale phase's fleets: PersistentFleet (a claim each member, which kwok provisions one at a time, about one a second) or Bucket")
	fs.DurationVar(&c.scaleWindow, "scale-window", 5*time.Minute, "the scale phase's windows: at rest, and after the operator's restart")
	fs.IntVar(&c.nodes, "nodes", envInt("BENCH_NODES", 20), "fake nodes of the bench's control plane")
	fs.IntVar(&c.coreCount, "core-count", 3, "go test -count of the machine benchmarks")
	fs.StringVar(&c.coreBenchtime, "core-benchtime", "300ms", "go test -benchtime of the machine benchmarks")
	fs.StringVar(&c.out, "out", "docs/benchmarks.md", "where the Markdown table is written")
	fs.StringVar(&only, "only", "", "comma-separated subset: core,overhead,scalein,steady,scale (default all but scale in the quick mode, all in the long mode); a subset writes to -out all the same")
	fs.StringVar(&c.clusterCache, "cluster-cache", filepath.Join(root, ".cache", "bench", "cluster"), "CLUSTER_CACHE of the bench's own control plane")
	fs.IntVar(&c.ports.apiserver, "apiserver-port", envInt("BENCH_APISERVER_PORT", 36443), "its kube-apiserver port")
	fs.IntVar(&c.ports.etcdClient, "etcd-client-port", envInt("BENCH_ETCD_CLIENT_PORT", 33790), "its etcd client port")
	fs.IntVar(&c.ports.etcdPeer, "etcd-peer-port", envInt("BENCH_ETCD_PEER_PORT", 33800), "its etcd peer port")
	fs.IntVar(&c.ports.controllerManager, "controller-manager-port", envInt("BENCH_CONTROLLER_MANAGER_PORT", 36257), "its kube-controller-manager port")
	fs.IntVar(&c.ports.scheduler, "scheduler-port", envInt("BENCH_SCHEDULER_PORT", 36259), "its kube-scheduler port")
	fs.IntVar(&c.ports.kwok, "kwok-port", envInt("BENCH_KWOK_PORT", 36080), "its kwok port")
	fs.IntVar(&c.ports.metricsServer, "metrics-server-port", envInt("BENCH_METRICS_SERVER_PORT", 36090), "its metrics-server port")
	fs.BoolVar(&c.keep, "keep", false, "leave the bench's control plane running at the end")
	var opFlags string
	fs.StringVar(&opFlags, "operator-flags", os.Getenv("BENCH_OPERATOR_FLAGS"), "flags added to every operator the bench starts, space-separated (e.g. \"--workers 64\"), to compare settings; the table's header names them")
	_ = fs.Parse(os.Args[1:])
	c.operatorFlags = strings.Fields(opFlags)
	if c.fleets < 1 || c.repeats < 1 || c.scaleFleets < 1 || c.scaleMembers < 1 || c.scaleWindow <= 0 {
		fatal(fmt.Errorf("-fleets, -repeats, -scale-fleets, -scale-members and -scale-window must be positive"))
	}
	if p := v1alpha1.Profile(c.scaleProfile); p != v1alpha1.ProfilePersistentFleet && p != v1alpha1.ProfileBucket {
		fatal(fmt.Errorf("-scale-profile %q: want PersistentFleet or Bucket", c.scaleProfile))
	}
	c.memLevels = []int{0, c.fleets, 2 * c.fleets}
	if longMode(c.fleets) {
		c.memLevels = []int{0, 100, c.fleets}
	}
	if levels != "" {
		c.memLevels = nil
		for _, s := range strings.Split(levels, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 0 {
				fatal(fmt.Errorf("-memory-levels %q", levels))
			}
			c.memLevels = append(c.memLevels, n)
		}
	}
	c.only = map[string]bool{}
	for _, s := range strings.Split(only, ",") {
		if s = strings.TrimSpace(s); s != "" {
			c.only[s] = true
		}
	}
	c.workDir = filepath.Join(root, ".cache", "bench")
	if !filepath.IsAbs(c.out) {
		c.out = filepath.Join(root, c.out)
	}

	b := &bench{root: root, cfg: c, log: os.Stderr}
	os.Exit(b.run())
}

// want says whether a phase runs: every phase when -only names none, but scale only in the
// long mode.
func (b *bench) want(phase string) bool {
	if len(b.cfg.only) == 0 {
		return phase != "scale" || longMode(b.cfg.fleets)
	}
	return b.cfg.only[phase]
}

// longMode is a run of more than 100 fleets (BENCH_FLEETS=500 make bench): its memory levels are
// 0, 100 and N, it runs the scale phase, and it writes its own part of -out.
func longMode(fleets int) bool { return fleets > 100 }

func (b *bench) run() int {
	started := time.Now()
	// The commit at the start: the tree may move while a long run lasts.
	commit := gitCommit(b.root)
	rep := &report{cfg: b.cfg, started: started, machine: machineInfo()}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// An interrupt stops what this run started (operators, then its control plane) before exiting.
	var cleanup sync.Once
	stopAll := func() {
		cleanup.Do(func() {
			b.stopOperators()
			if b.cl != nil && !b.cfg.keep {
				b.logf("stopping the bench's control plane (cluster/down.sh, CLUSTER_CACHE=%s)", b.cfg.clusterCache)
				if err := b.cl.Down(); err != nil {
					b.logf("%v", err)
				}
			}
		})
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sigs
		b.logf("%s: stopping", s)
		cancel()
		stopAll()
		os.Exit(130)
	}()
	defer stopAll()

	for _, d := range []string{"logs", "profiles"} {
		p := filepath.Join(b.cfg.workDir, d)
		_ = os.RemoveAll(p)
		if err := os.MkdirAll(p, 0o755); err != nil {
			b.logf("%v", err)
			return 1
		}
	}

	// The machine's benchmarks run first, before the control plane adds its own load.
	if b.want("core") {
		b.logf("core: machine benchmarks")
		rep.core, rep.coreErr = b.runCore(ctx)
		if rep.coreErr != nil {
			b.logf("core: %v", rep.coreErr)
		}
	}

	if b.want("overhead") || b.want("scalein") || b.want("steady") || b.want("scale") {
		if err := b.startCluster(ctx); err != nil {
			b.logf("%v", err)
			rep.clusterErr = err
		} else {
			if b.want("overhead") {
				rep.overhead, rep.overheadErr = b.overhead(ctx)
				b.logIf("overhead", rep.overheadErr)
			}
			if b.want("scalein") {
				rep.scaleIn, rep.scaleInErr = b.scaleIn(ctx)
				b.logIf("scale-in", rep.scaleInErr)
			}
			if b.want("steady") {
				rep.steady, rep.steadyErr = b.steady(ctx)
				b.logIf("memory and writes", rep.steadyErr)
			}
			// Last: it leaves its fleets to the control plane, which stops next.
			if b.want("scale") {
				rep.scale, rep.scaleErr = b.scale(ctx)
				b.logIf("scale", rep.scaleErr)
			}
		}
	}
	rep.terminating = countInLogs(filepath.Join(b.cfg.workDir, "logs"), "because it is being terminated")
	rep.took = time.Since(started)

	md := rep.markdown()
	fmt.Println(md)
	row := ""
	if rep.scaleIn != nil && len(rep.scaleIn.steps) > 0 {
		row = rep.scaleIn.runRow(started, commit, longMode(b.cfg.fleets))
	}
	if err := b.write(md, row); err != nil {
		b.logf("write %s: %v", b.cfg.out, err)
		return 1
	}
	b.logf("wrote the %s mode's part of %s", modePart(b.cfg.fleets), b.cfg.out)
	if rep.failed() {
		return 1
	}
	return 0
}

// write puts the report in its mode's part of -out, keeping the other mode's part, and adds row,
// when there is one, to the runs part.
func (b *bench) write(md, row string) error {
	if err := os.MkdirAll(filepath.Dir(b.cfg.out), 0o755); err != nil {
		return err
	}
	old, err := os.ReadFile(b.cfg.out)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	doc := mergePart(string(old), modePart(b.cfg.fleets), md)
	if row != "" {
		doc = mergePart(doc, runsPart, runsBody(doc, row))
	}
	return os.WriteFile(b.cfg.out, []byte(doc), 0o644)
}

// The parts of -out: the quick mode's first, then the runs of the scale-in walk, then the long
// mode's.
const (
	quickPart = "quick"
	longPart  = "long"
)

var partOrder = []string{quickPart, runsPart, longPart}

func modePart(fleets int) string {
	if longMode(fleets) {
		return longPart
	}
	return quickPart
}

func partMarkers(part string) (begin, end string) {
	return "<!-- bench:" + part + " -->", "<!-- /bench:" + part + " -->"
}

// wrapPart is body between the markers of part, each on a line of its own.
func wrapPart(part, body string) string {
	begin, end := partMarkers(part)
	return begin + "\n" + strings.TrimRight(body, "\n") + "\n" + end + "\n"
}

// findPart is where part's markers delimit it in doc, the markers and the end marker's line
// break included; ok is false unless both are there, in order.
func findPart(doc, part string) (from, to int, ok bool) {
	begin, end := partMarkers(part)
	from = strings.Index(doc, begin)
	if from < 0 {
		return 0, 0, false
	}
	e := strings.Index(doc[from:], end)
	if e < 0 {
		return 0, 0, false
	}
	to = from + e + len(end)
	if strings.HasPrefix(doc[to:], "\n") {
		to++
	}
	return from, to, true
}

// mergePart returns doc with part's delimited block replaced by body, everything else kept. A doc
// with no part of that mode gets it in its place among the parts (the quick mode's first). A doc
// with no markers at all (as written before there were two parts) is taken as the quick mode's
// part: a quick write replaces it whole, a long write keeps it, wrapped in the quick markers.
func mergePart(doc, part, body string) string {
	wrapped := wrapPart(part, body)
	if from, to, ok := findPart(doc, part); ok {
		return doc[:from] + wrapped + doc[to:]
	}
	marked := false
	for _, p := range partOrder {
		if _, _, ok := findPart(doc, p); ok {
			marked = true
		}
	}
	if !marked {
		if part == quickPart || strings.TrimSpace(doc) == "" {
			return wrapped
		}
		doc = wrapPart(quickPart, doc)
	}
	// Insert before the first part that comes after this one, else after the last part before it.
	i := 0
	for i < len(partOrder) && partOrder[i] != part {
		i++
	}
	for _, p := range partOrder[i+1:] {
		if from, _, ok := findPart(doc, p); ok {
			return doc[:from] + wrapped + "\n" + doc[from:]
		}
	}
	for j := i - 1; j >= 0; j-- {
		if _, to, ok := findPart(doc, partOrder[j]); ok {
			return doc[:to] + "\n" + wrapped + doc[to:]
		}
	}
	return doc + "\n" + wrapped
}

func (b *bench) logIf(what string, err error) {
	if err != nil {
		b.logf("%s: %v", what, err)
	}
}

func (b *bench) startCluster(ctx context.Context) error {
	b.operatorBin = filepath.Join(b.cfg.workDir, "celld-operator")
	b.logf("building the operator (go build ./cmd/celld-operator)")
	build := exec.Command("go", "build", "-o", b.operatorBin, "./cmd/celld-operator")
	build.Dir = b.root
	build.Stdout, build.Stderr = b.log, b.log
	if err := build.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/celld-operator: %w", err)
	}
	b.cl = newCluster(b.root, &b.cfg, b.log)
	b.logf("preparing the bench's control plane in %s (binaries from cluster/build.sh)", b.cfg.clusterCache)
	if err := b.cl.prepare(); err != nil {
		return err
	}
	b.logf("starting it: apiserver :%d, etcd :%d/:%d, %d nodes", b.cfg.ports.apiserver, b.cfg.ports.etcdClient, b.cfg.ports.etcdPeer, b.cfg.nodes)
	return b.cl.up(ctx)
}

// countInLogs counts the lines of the operator logs in dir that contain s.
func countInLogs(dir, s string) int {
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		n += strings.Count(string(b), s)
	}
	return n
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(2)
}

// machineInfo is what the table's header says the figures were measured on.
func machineInfo() string {
	cpus := strconv.Itoa(numCPU())
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
					mem = fmt.Sprintf(", %.1f GiB memory", kb/(1<<20))
				}
			}
		}
	}
	model := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "model name") {
				if i := strings.IndexByte(line, ':'); i > 0 {
					model = " (" + strings.TrimSpace(line[i+1:]) + ")"
				}
				break
			}
		}
	}
	load := ""
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			load = ", load average at start " + strings.Join(f[:3], " ")
		}
	}
	return cpus + " CPUs" + model + mem + load
}
