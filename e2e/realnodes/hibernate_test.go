package realnodes

import (
	"io/fs"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/e2e/celldstore/load"
)

// volumes names each of the fleet's claims with the PersistentVolume bound to it.
func (f *fixture) volumes() map[string]string {
	f.t.Helper()
	claims, err := suite.kube.CoreV1().PersistentVolumeClaims(f.ns).List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatalf("list claims: %v", err)
	}
	out := map[string]string{}
	for _, c := range claims.Items {
		out[c.Name] = c.Spec.VolumeName
	}
	return out
}

// files lists the regular files under each disk's folder, by the disk's claim, but the temporary
// ones of writes in progress.
func files(t *testing.T, disks map[string]disk) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for name, d := range disks {
		err := filepath.WalkDir(d.dir, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			// A temporary file is a write in progress, never acknowledged: celld renames it
			// into place once it is durable, or removes it when it starts again.
			if e.Type().IsRegular() && !strings.HasPrefix(e.Name(), ".tmp-") {
				rel, _ := filepath.Rel(d.dir, p)
				out[name] = append(out[name], rel)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("read the folder of disk %s: %v", name, err)
		}
	}
	return out
}

// TestHibernateKeepsAcknowledgedWrites: the load client writes to a fleet of three, then stops;
// the fleet is hibernated (every member stops at once, no celld process is left) and woken, and
// every write it acknowledged is read back. A PersistentFleet wakes on the same claims, the same
// volumes and the same files; a Bucket fleet's working copy is gone with its scratch disks and
// rebuilt from its bucket. The contract's judge reads the API server's record throughout.
func TestHibernateKeepsAcknowledgedWrites(t *testing.T) {
	for _, c := range []struct {
		name    string
		profile v1alpha1.Profile
	}{{"sleep-pf", v1alpha1.ProfilePersistentFleet}, {"sleep-bf", v1alpha1.ProfileBucket}} {
		t.Run(string(c.profile), func(t *testing.T) {
			f := newFixture(t)
			fl := f.waitConverged(f.create(f.newFleet(c.name, c.profile, 3)).Name)
			run := f.startLoad(fl)
			waitFor(t, f.ctx, "acknowledged writes", 2*time.Minute, func() bool {
				recs, _ := load.ReadJournal(run.journal)
				return len(recs) > 300
			})
			run.stop()
			persistent := c.profile == v1alpha1.ProfilePersistentFleet
			var disksBefore map[string]disk
			var filesBefore map[string][]string
			vols := f.volumes()
			if persistent {
				disksBefore = f.disks(fl)
				filesBefore = files(t, disksBefore)
				if len(disksBefore) != 3 {
					t.Fatalf("disks %v, want 3", keys(disksBefore))
				}
			}

			t.Log("hibernate")
			f.update(fl.Name, func(x *v1alpha1.CelldFleet) { x.Spec.Hibernate = true })
			waitFor(t, f.ctx, "hibernated", converge, func() bool {
				got, err := suite.celld.CelldV1alpha1().CelldFleets(f.ns).Get(f.ctx, fl.Name, metav1.GetOptions{})
				return err == nil && got.Status.State == v1alpha1.StateHibernated
			})
			if procs := processes(fl.UID); len(procs) != 0 {
				t.Errorf("celld processes run while the fleet sleeps: %v", keys(procs))
			}
			if got := f.volumes(); !maps.Equal(got, vols) {
				t.Fatalf("asleep: claims and volumes %v, want %v", got, vols)
			}

			t.Log("wake")
			f.update(fl.Name, func(x *v1alpha1.CelldFleet) { x.Spec.Hibernate = false })
			fl = f.waitConverged(fl.Name)
			if got := f.volumes(); !maps.Equal(got, vols) {
				t.Fatalf("woken: claims and volumes %v, want the same %v", got, vols)
			}
			if persistent {
				after := f.disks(fl)
				if !maps.Equal(after, disksBefore) {
					t.Fatalf("woken: disks %v, want the same %v", after, disksBefore)
				}
				now := files(t, after)
				for claim, names := range filesBefore {
					have := map[string]bool{}
					for _, n := range now[claim] {
						have[n] = true
					}
					for _, n := range names {
						if !have[n] {
							t.Errorf("woken: file %s of disk %s is gone", n, claim)
						}
					}
				}
			}

			rep := f.check(fl, run)
			if rep.Checked == 0 || rep.Checked != run.stats.Acked {
				t.Errorf("checked %d writes, the load client had %d acknowledged", rep.Checked, run.stats.Acked)
			}
			if len(rep.Lost) != 0 {
				t.Errorf("%d acknowledged writes lost across hibernation:\n%s", len(rep.Lost), rep)
			}
			f.deleteFleet(fl.Name)
			f.verify()
		})
	}
}
