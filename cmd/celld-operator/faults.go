//go:build faults

package main

import (
	"flag"
	"fmt"

	"github.com/rs/zerolog"
	"k8s.io/client-go/rest"

	"github.com/celld/celld-operator/drivers/kube"
)

// The test build's flags: the end-to-end tests build the operator with -tags faults to fail a
// share of its requests on purpose.
func init() {
	addFaultFlags = func(fs *flag.FlagSet, f *runFlags) {
		fs.Float64Var(&f.faultRate, "api-fault-rate", 0, "for testing resilience only: fail this share (0 to 1) of the operator's API requests on purpose (500, 409, 429, timeouts, dropped watches)")
		fs.Uint64Var(&f.faultSeed, "api-fault-seed", 1, "seed of the faults --api-fault-rate injects, to reproduce a run")
	}
	checkFaultFlags = func(f runFlags) error {
		if !(f.faultRate >= 0 && f.faultRate <= 1) { // NaN fails both
			return fmt.Errorf("--api-fault-rate %v: want a share from 0 to 1", f.faultRate)
		}
		return nil
	}
	injectFaults = func(cfg *rest.Config, f runFlags, m *kube.Metrics, log zerolog.Logger) {
		if f.faultRate == 0 {
			return
		}
		kube.InjectFaults(cfg, kube.Faults{Rate: f.faultRate, Seed: f.faultSeed}, m)
		log.Warn().Float64("rate", f.faultRate).Uint64("seed", f.faultSeed).
			Msg("injecting API faults on purpose (--api-fault-rate): for testing resilience, never in production")
	}
}
