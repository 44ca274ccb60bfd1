package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"

	"github.com/celld/celld-operator/drivers/kube"
	"github.com/celld/celld-operator/internal/cli"
)

// runFlags are the flags of `celld-operator run`.
type runFlags struct {
	kubeconfig, namespace               string
	workers                             int
	qps                                 float64
	burst                               int
	movingLimit                         string
	metricsAddr, probeAddr              string
	metricsCertDir                      string
	leaderElect, pprof, metricsSecure   bool
	leaderNamespace                     string
	logFormat, logLevel                 string
	resync, capacityInterval            time.Duration
	leaseDuration, renewDeadline, retry time.Duration
	faultRate                           float64
	faultSeed                           uint64
}

// Fault injection exists only in a test build (go build -tags faults, see faults.go): these stay
// nil in the production binary, which has neither the flags nor the code.
var (
	addFaultFlags   func(fs *pflag.FlagSet, f *runFlags)
	checkFaultFlags func(f runFlags) error
	injectFaults    func(cfg *rest.Config, f runFlags, m *kube.Metrics, log zerolog.Logger)
)

func newRun() *cobra.Command {
	var f runFlags
	c := &cobra.Command{
		Use:   "run",
		Short: "Run the operator against a cluster (--kubeconfig, --leader-elect, ...)",
		Long: `run runs the operator: it watches CelldFleets (in every namespace, or in those --namespace lists) and keeps
each fleet's objects as the fleet asks, until SIGTERM or SIGINT. In a cluster it uses the Pod's
service account; outside, --kubeconfig.`,
		Example: `  celld-operator run --leader-elect
  celld-operator run --kubeconfig ~/.kube/config --namespace team --metrics-secure=false --log-format console`,
		Args: cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := checkRunFlags(f); err != nil {
				return cli.Usagef("%v (see %s --help)", err, c.CommandPath())
			}
			log, err := newLogger(c.ErrOrStderr(), f.logFormat, f.logLevel)
			if err != nil {
				return cli.UsageError{Err: err}
			}
			klog.SetLogger(kube.Logr(log.With().Str("component", "client-go").Logger()))
			return run(f, log)
		},
	}
	addRunFlags(c.Flags(), &f)
	_ = c.MarkFlagFilename("kubeconfig")
	_ = c.MarkFlagDirname("metrics-cert-dir")
	for name, values := range map[string][]string{"log-format": {"json", "console"}, "log-level": {"debug", "info", "warn", "error"}} {
		_ = c.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
	}
	return c
}

// addRunFlags defines the flags of run: their names and defaults are an interface (the manifests,
// the Helm chart, the end-to-end tests and the benchmark pass them).
func addRunFlags(fs *pflag.FlagSet, f *runFlags) {
	fs.SortFlags = false
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "path to a kubeconfig; empty uses the in-cluster config")
	fs.StringVar(&f.namespace, "namespace", "", "manage the fleets of these namespaces only, comma-separated (team-a,team-b); empty manages every namespace")
	fs.IntVar(&f.workers, "workers", kube.DefaultWorkers, "fleets synced concurrently")
	// client-go's default 5 QPS is sized for kubectl; a resync of many fleets is mostly reads
	// from the caches, but a burst of first applies, or 50 fleets scaling in, is not. The limit
	// guards against a runaway loop; sharing the API server is its flow control's business (the
	// shipped FlowSchema celld-operator).
	fs.Float64Var(&f.qps, "kube-api-qps", 100, "requests per second the operator allows itself, sustained, per client "+
		"(the writes that move fleets, the status writes and the Events have one each); the API server's flow control shares the server with everyone else")
	fs.IntVar(&f.burst, "kube-api-burst", 200, "requests the operator may send at once above --kube-api-qps, per client")
	fs.StringVar(&f.movingLimit, "moving-client-limit", "auto", "auto: no client-side limit on the writes that move fleets (and their premises' reads) "+
		"when the API server runs priority and fairness, which queues them in the operator's own priority level; --kube-api-qps otherwise. always: --kube-api-qps on every client")
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", ":8443", `address of the Prometheus /metrics endpoint; "0" disables it`)
	fs.BoolVar(&f.metricsSecure, "metrics-secure", true, "serve /metrics over HTTPS to callers whose bearer token may get /metrics (TokenReview, SubjectAccessReview); false serves plain HTTP to anyone, for local development only")
	fs.StringVar(&f.metricsCertDir, "metrics-cert-dir", "", "directory with tls.crt and tls.key for --metrics-secure; empty makes a self-signed certificate at start")
	fs.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
	fs.BoolVar(&f.pprof, "pprof", false, "also serve the Go profiler at /debug/pprof/ on the metrics address, behind the same authorization (for benchmarks and debugging)")
	fs.BoolVar(&f.leaderElect, "leader-elect", false, "work only while holding the celld-operator Lease, so replicas can stand by")
	fs.StringVar(&f.leaderNamespace, "leader-election-namespace", defaultLeaderNamespace(), "namespace of the leader election Lease")
	fs.StringVar(&f.logFormat, "log-format", "json", "json or console")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.DurationVar(&f.resync, "resync-period", kube.DefaultResync, "how often every fleet is re-synced even if nothing changed")
	fs.DurationVar(&f.capacityInterval, "capacity-interval", kube.DefaultCapacityInterval, "how often member usage is read for Recommend and Auto fleets")
	fs.DurationVar(&f.leaseDuration, "leader-election-lease-duration", 15*time.Second, "how long a standby waits before taking over a lease that is not renewed")
	fs.DurationVar(&f.renewDeadline, "leader-election-renew-deadline", 10*time.Second, "how long the leader retries renewing before it gives up leading")
	fs.DurationVar(&f.retry, "leader-election-retry-period", 2*time.Second, "how often the lease is tried")
	if addFaultFlags != nil {
		addFaultFlags(fs, f)
	}
}

// checkRunFlags refuses values of the right type that run cannot work with.
func checkRunFlags(f runFlags) error {
	switch {
	case f.workers < 1:
		return fmt.Errorf("--workers %d: want at least 1", f.workers)
	case !(f.qps > 0) || f.burst < 1:
		return fmt.Errorf("--kube-api-qps %v, --kube-api-burst %d: want both positive", f.qps, f.burst)
	case f.movingLimit != "auto" && f.movingLimit != "always":
		return fmt.Errorf("--moving-client-limit %q: want auto or always", f.movingLimit)
	case f.logFormat != "json" && f.logFormat != "console":
		return fmt.Errorf("--log-format %q: want json or console", f.logFormat)
	case f.resync <= 0 || f.capacityInterval <= 0:
		return errors.New("--resync-period and --capacity-interval must be positive")
	case f.leaderElect && f.leaderNamespace == "":
		return errors.New("--leader-election-namespace is required with --leader-elect")
	case f.leaderElect && !(f.leaseDuration > f.renewDeadline && f.renewDeadline > f.retry && f.retry > 0):
		return errors.New("leader election wants lease duration > renew deadline > retry period > 0")
	case f.probeAddr == "" || f.probeAddr == "0":
		return errors.New("--health-probe-bind-address is required")
	case f.metricsCertDir != "" && !f.metricsSecure:
		return errors.New("--metrics-cert-dir needs --metrics-secure: plain HTTP has no certificate")
	}
	if _, err := kube.ParseNamespaces(f.namespace); err != nil {
		return err
	}
	if _, err := zerolog.ParseLevel(f.logLevel); err != nil || f.logLevel == "" {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", f.logLevel)
	}
	if checkFaultFlags != nil {
		if err := checkFaultFlags(f); err != nil {
			return err
		}
	}
	return nil
}

// defaultLeaderNamespace is the Pod's own namespace (from the downward API) when it runs in a
// cluster, the install namespace otherwise.
func defaultLeaderNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return "celld-system"
}

func newLogger(w io.Writer, format, level string) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil {
		return zerolog.Logger{}, fmt.Errorf("--log-level %q: %w", level, err)
	}
	if format == "console" {
		// Colours only on a terminal: escape codes in a file or a pipe are noise.
		f, isFile := w.(*os.File)
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339, NoColor: !isFile || !term.IsTerminal(int(f.Fd()))}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}

// clientLimits sizes the client that moves fleets to the API server: under priority and fairness
// the server queues the operator's requests in a priority level of their own (the shipped
// FlowSchema celld-operator, or the server's defaults), and a client-side token bucket would only
// make a step wait behind the premises' reads of the other fleets stepping at the same time. The
// status and Event clients keep --kube-api-qps: nothing waits on them.
func clientLimits(cfg *rest.Config, f runFlags, log zerolog.Logger) kube.ClientLimits {
	if f.movingLimit != "auto" {
		return kube.ClientLimits{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	apf, err := kube.ServerRunsFlowControl(ctx, cfg)
	switch {
	case err != nil:
		log.Warn().Err(err).Float64("qps", f.qps).Msg("the writes that move fleets keep the --kube-api-qps limit: whether the API server runs priority and fairness is unknown")
	case !apf:
		log.Info().Float64("qps", f.qps).Msg("the API server does not run priority and fairness: the writes that move fleets keep the --kube-api-qps limit")
	default:
		log.Info().Msg("the API server runs priority and fairness: no client-side limit on the writes that move fleets")
	}
	return kube.ClientLimits{MovingUnlimited: err == nil && apf}
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster config (pass --kubeconfig to run outside a cluster): %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}

func run(f runFlags, log zerolog.Logger) error {
	cfg, err := restConfig(f.kubeconfig)
	if err != nil {
		return err
	}
	cfg.UserAgent = "celld-operator/" + version
	cfg.QPS, cfg.Burst = float32(f.qps), f.burst
	// Reviews of who scrapes /metrics go on a client of their own: they are not the operator's
	// writes (nothing is stored), and a standby answers scrapes too.
	reviewCfg := rest.CopyConfig(cfg)
	metrics := kube.NewMetrics()
	metrics.SetBuild(version, commit)
	var election kube.LeaderElection
	if f.leaderElect {
		host, _ := os.Hostname()
		election = kube.LeaderElection{
			Namespace: f.leaderNamespace, Name: leaseName, Identity: host + "_" + string(uuid.NewUUID()),
			LeaseDuration: f.leaseDuration, RenewDeadline: f.renewDeadline, RetryPeriod: f.retry,
		}
		election.Leadership = kube.NewLeadership(election)
		// First, so the guard sits next to the wire, under the faults and the counters.
		kube.GuardWrites(cfg, election.Leadership, metrics)
	}
	if injectFaults != nil {
		// Under the counters: every request is counted, the failed ones too.
		injectFaults(cfg, f, metrics, log)
	}
	kube.CountRequests(cfg, metrics)
	clients, stopEvents, err := kube.NewClients(cfg, clientLimits(cfg, f, log))
	if err != nil {
		return err
	}
	defer stopEvents()
	namespaces, err := kube.ParseNamespaces(f.namespace)
	if err != nil {
		return err
	}
	ctl, err := kube.NewController(clients, kube.Options{
		Namespaces: namespaces, Workers: f.workers, Resync: f.resync, CapacityInterval: f.capacityInterval,
		Log: log, Metrics: metrics, Leadership: election.Leadership,
	})
	if err != nil {
		return err
	}

	ctx, stopSignals := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stopSignals()
	// returned is closed before stopSignals runs (defers run last first), so a return on an error
	// is not told as a signal.
	returned := make(chan struct{})
	defer close(returned)
	go func() {
		select {
		case <-returned:
			return
		case <-ctx.Done():
		}
		select {
		case <-returned:
			return
		default:
		}
		log.Info().Msg("signal received: shutting down (a second signal exits at once)")
		stopSignals()
	}()
	// Servers outlive the work, so the probes answer while the last sync finishes.
	serveCtx, stopServing := context.WithCancel(context.Background())
	defer stopServing()

	var watchdog *leaderelection.HealthzAdaptor
	if f.leaderElect {
		watchdog = leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	}
	probes := kube.Probes{
		Live: func(r *http.Request) error {
			if watchdog != nil {
				return watchdog.Check(r)
			}
			return nil
		},
		Ready: func() error {
			if !ctl.Synced() {
				return errors.New("caches not synced")
			}
			return nil
		},
	}
	var served []<-chan error
	done, err := kube.Serve(serveCtx, f.probeAddr, probes.Handler(), log.With().Str("endpoint", "probes").Logger())
	if err != nil {
		return fmt.Errorf("--health-probe-bind-address %s: %w", f.probeAddr, err)
	}
	served = append(served, done)
	if f.metricsAddr != "0" && f.metricsAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", metrics.Handler())
		if f.pprof {
			kube.AddPprof(mux)
		}
		mlog := log.With().Str("endpoint", "metrics").Logger()
		var h http.Handler = mux
		var crt *tls.Certificate
		if f.metricsSecure {
			reviews, err := kubernetes.NewForConfig(reviewCfg)
			if err != nil {
				return fmt.Errorf("review client: %w", err)
			}
			c, err := kube.ServingCert(f.metricsCertDir)
			if err != nil {
				return fmt.Errorf("--metrics-cert-dir %q: %w", f.metricsCertDir, err)
			}
			h, crt = kube.Authorize(mux, reviews, mlog), &c
		} else {
			mlog.Warn().Msg("serving /metrics over plain HTTP to anyone (--metrics-secure=false): for local development only")
		}
		done, err := kube.ServeTLS(serveCtx, f.metricsAddr, h, crt, mlog)
		if err != nil {
			return fmt.Errorf("--metrics-bind-address %s: %w", f.metricsAddr, err)
		}
		served = append(served, done)
	}

	stopCaches := make(chan struct{})
	defer close(stopCaches)
	ctl.Start(stopCaches)

	if f.leaderElect {
		election.Watchdog = watchdog
		err = kube.RunLeader(ctx, clients.Kube, election, log, ctl.Run)
	} else {
		err = ctl.Run(ctx)
	}
	stopServing()
	for _, d := range served {
		if serr := <-d; serr != nil && err == nil {
			err = serr
		}
	}
	if err != nil {
		return err
	}
	log.Info().Msg("stopped")
	return nil
}

// leaseName is the leader-election Lease's name, in the operator's namespace.
const leaseName = "celld-operator"
