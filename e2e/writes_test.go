package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/e2e/testenv"
)

// TestZeroWritesAtRest: once the samples of deploy/samples have converged, the operator sends no
// write to the API server, through resyncs every 10 s; and an operator started on a converged
// namespace writes nothing either.
func TestZeroWritesAtRest(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	op := f.startOperator("--resync-period=10s")
	var fleets []string
	for _, fl := range f.samples() {
		fleets = append(fleets, f.create(fl).Name)
	}
	for _, name := range fleets {
		f.waitConverged(name)
	}
	// The status that shows the fleets converged is itself the operator's last write; let the
	// writes already in flight land (its Event, say) before counting.
	converged, _ := op.writes(t)
	f.quiet(op, 3*time.Second)

	const rest = 60 * time.Second
	before, bySeries := op.writes(t)
	mark := op.LogOffset()
	t.Logf("%s converged with %g writes (%g when their status first showed it):%s", strings.Join(fleets, ", "), before, converged, formatSeries(bySeries))
	f.holds(rest, "no write at rest", func() error {
		if n, now := op.writes(t); n != before {
			return fmt.Errorf("%g writes:%s", n-before, formatSeries(testenv.Delta(now, bySeries)))
		}
		return nil
	})
	after, now := op.writes(t)
	t.Logf("api_writes_total at rest: %g, then %g after %s", before, after, rest)
	if after != before {
		t.Errorf("%g writes at rest in %s:%s%s", after-before, rest, formatSeries(testenv.Delta(now, bySeries)), op.loggedSince(mark, 40))
	}

	// A restarted operator finds everything as it wants it: a full resync, and no write.
	op.stop(t)
	again := f.startOperator("--resync-period=10s")
	for _, name := range fleets {
		f.waitConverged(name)
	}
	f.holds(30*time.Second, "no write from an operator started on converged fleets", func() error {
		if n, by := again.writes(t); n != 0 {
			return fmt.Errorf("%g writes:%s", n, formatSeries(by))
		}
		return nil
	})
	t.Logf("the restarted operator wrote nothing in 30 s (3 resyncs)")
}

// quiet waits, up to a minute, until the operator's write counter has not moved for d.
func (f *fixture) quiet(op *operator, d time.Duration) {
	f.t.Helper()
	last, _ := op.writes(f.t)
	since := time.Now()
	err := wait.PollUntilContextTimeout(f.ctx, poll, time.Minute, true, func(context.Context) (bool, error) {
		if n, _ := op.writes(f.t); n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= d, nil
	})
	if err != nil {
		f.t.Fatalf("the operator kept writing for a minute after the fleets converged")
	}
}

// samples reads the fleets of deploy/samples, each with a bucket of its own: the samples' buckets
// may be reserved already, by make demo for one.
func (f *fixture) samples() []*v1alpha1.CelldFleet {
	f.t.Helper()
	files, err := filepath.Glob(filepath.Join(suite.root, "deploy", "samples", "*.yaml"))
	if err != nil || len(files) == 0 {
		f.t.Fatalf("deploy/samples: %v, %d files", err, len(files))
	}
	var out []*v1alpha1.CelldFleet
	profiles := map[v1alpha1.Profile]bool{}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			fl := &v1alpha1.CelldFleet{}
			if err := yaml.UnmarshalStrict([]byte(doc), fl); err != nil {
				f.t.Fatalf("%s: %v", file, err)
			}
			fl.Spec.Bucket.Name = f.bucket(fl.Spec.Bucket.Name)
			profiles[fl.Spec.Profile] = true
			out = append(out, fl)
		}
	}
	if !profiles[v1alpha1.ProfileBucket] || !profiles[v1alpha1.ProfilePersistentFleet] {
		f.t.Fatalf("deploy/samples: want a fleet of each profile, got %v", profiles)
	}
	return out
}
