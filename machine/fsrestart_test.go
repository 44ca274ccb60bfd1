package machine_test

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/machine"
)

// TestFilesystemRestartOnlyWhenSettled: a disk whose filesystem waits for its member to start
// again (FileSystemResizePending past the online grace) restarts the members through a new Pod
// template, a rolling update: only once the fleet is settled, every member ready. With one
// member not ready the template keeps what it had (clause 1: no member taken away while another
// is), and asks again once it is ready.
func TestFilesystemRestartOnlyWhenSettled(t *testing.T) {
	base := convergedFleet(t, v1alpha1.ProfilePersistentFleet)
	pending := func(notReady bool) machine.Decision {
		v := copyView(base)
		for i := range v.Disks {
			v.Disks[i].Resize, v.Disks[i].ResizePendingSince = events.ResizeFileSystemPending, v.Now.Add(-time.Hour)
		}
		if notReady {
			v.Members[1].Ready, v.Members[1].NotReadySince = false, v.Now.Add(-time.Second)
		}
		return machine.New().Step(&v)
	}
	restarts := func(d machine.Decision) []string {
		var out []string
		for _, a := range d.Actions {
			if s, ok := a.Object.(*appsv1.StatefulSet); ok && a.Kind == machine.Apply {
				if size := s.Spec.Template.Annotations[v1alpha1.AnnotationFilesystemResize]; size != "" {
					out = append(out, size)
				}
			}
		}
		return out
	}
	if r := restarts(pending(false)); len(r) != 1 {
		t.Fatalf("settled, filesystems pending: %d templates asking the members to start again, want 1", len(r))
	}
	if r := restarts(pending(true)); len(r) != 0 {
		t.Errorf("a member not ready, filesystems pending: the template asks the members to start again (%v)", r)
	}
}
