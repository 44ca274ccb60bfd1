//go:build faults

package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/celld/celld-operator/drivers/kube"
)

var (
	stall   string
	stalled kube.Stall
)

// The test build's flags: the end-to-end tests build the operator with -tags faults to fail a
// share of its requests on purpose.
func init() {
	addFaultFlags = func(fs *pflag.FlagSet, f *runFlags) {
		fs.Float64Var(&f.faultRate, "api-fault-rate", 0, "for testing resilience only: fail this share (0 to 1) of the operator's API requests on purpose (500, 409, 429, timeouts, dropped watches)")
		fs.Uint64Var(&f.faultSeed, "api-fault-seed", 1, "seed of the faults --api-fault-rate injects, to reproduce a run")
		fs.StringVar(&stall, "api-stall-writes", "", "for testing only: RESOURCE:DURATION holds every write to RESOURCE (as api_writes_total names it, e.g. statefulsets) that long before sending it")
	}
	checkFaultFlags = func(f runFlags) error {
		if !(f.faultRate >= 0 && f.faultRate <= 1) { // NaN fails both
			return fmt.Errorf("--api-fault-rate %v: want a share from 0 to 1", f.faultRate)
		}
		if stall != "" {
			res, d, ok := strings.Cut(stall, ":")
			dur, err := time.ParseDuration(d)
			if !ok || res == "" || err != nil || dur <= 0 {
				return fmt.Errorf("--api-stall-writes %q: want RESOURCE:DURATION, e.g. statefulsets:20s", stall)
			}
			stalled = kube.Stall{Resource: res, For: dur}
		}
		return nil
	}
	injectFaults = func(cfg *rest.Config, f runFlags, m *kube.Metrics, log zerolog.Logger) {
		if stalled.Resource != "" {
			kube.StallWrites(cfg, stalled, m)
			log.Warn().Str("resource", stalled.Resource).Dur("for", stalled.For).
				Msg("holding writes on purpose (--api-stall-writes): for testing only")
		}
		if f.faultRate == 0 {
			return
		}
		kube.InjectFaults(cfg, kube.Faults{Rate: f.faultRate, Seed: f.faultSeed}, m)
		log.Warn().Float64("rate", f.faultRate).Uint64("seed", f.faultSeed).
			Msg("injecting API faults on purpose (--api-fault-rate): for testing resilience, never in production")
	}
}
