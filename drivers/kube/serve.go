package kube

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
)

// Probes answer the kubelet's liveness and readiness checks.
type Probes struct {
	// Live fails when the process should be restarted (a leader that cannot renew its lease).
	Live func(*http.Request) error
	// Ready fails until the caches synced.
	Ready func() error
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}

// AddPprof serves the Go profiler under /debug/pprof/ on mux. It is off by default (run --pprof):
// a profile costs CPU while it runs and shows the process's internals, so it is for benchmarks
// and debugging, never left open by accident; with --metrics-secure it is behind the same
// authorization as /metrics (get on the non-resource URL /debug/pprof/...).
func AddPprof(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}

// Handler serves /healthz and /readyz.
func (p Probes) Handler() http.Handler {
	mux := http.NewServeMux()
	check := func(f func(*http.Request) error) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if f != nil {
				if err := f(r); err != nil {
					http.Error(w, err.Error(), http.StatusServiceUnavailable)
					return
				}
			}
			_, _ = w.Write([]byte("ok\n"))
		}
	}
	mux.Handle("/healthz", check(p.Live))
	mux.Handle("/readyz", check(func(*http.Request) error {
		if p.Ready == nil {
			return nil
		}
		return p.Ready()
	}))
	return mux
}

// Serve listens on addr and serves h until ctx ends. The listener is opened before it returns, so
// a taken port is an error at startup rather than a log line later.
func Serve(ctx context.Context, addr string, h http.Handler, log zerolog.Logger) (<-chan error, error) {
	return ServeTLS(ctx, addr, h, nil, log)
}

// ServeTLS is Serve over TLS with certificate c; plain HTTP when c is nil.
func ServeTLS(ctx context.Context, addr string, h http.Handler, c *tls.Certificate, log zerolog.Logger) (<-chan error, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if c != nil {
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{*c}, MinVersion: tls.VersionTLS12})
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		log.Info().Str("address", ln.Addr().String()).Bool("tls", c != nil).Msg("serving")
		err := srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		done <- err
	}()
	return done, nil
}
