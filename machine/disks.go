package machine

import (
	"fmt"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/events"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/render"
)

// The reasons of a resize.
const (
	// ReasonStorageClassNotExpandable: spec.storage.size grew and the class does not allow its
	// claims to grow (Degraded); nothing is changed.
	ReasonStorageClassNotExpandable = "StorageClassNotExpandable"
	// ReasonDisksBelowSize: claims ask for less than spec.storage.size (DisksResizing).
	ReasonDisksBelowSize = "DisksBelowSize"
	// ReasonDisksExpanding: every claim asks for the size, and some volume or filesystem has yet
	// to reach it.
	ReasonDisksExpanding = "DisksExpanding"
	// ReasonDisksAtSize: every claim has the size it asks for.
	ReasonDisksAtSize = "DisksAtSize"
	// ReasonExpansionFailed: the resizer or the kubelet failed to expand a claim.
	ReasonExpansionFailed = "ExpansionFailed"
)

// diskFacts are the fleet's own claims against spec.storage.size. A resize is an action inside
// whatever state the fleet is in, not a state of its own: it takes no member away (the volume
// and its filesystem grow under the running member), so it neither waits for nor holds up a
// change of size, and a member that is down (often one whose disk is full) does not hold it back.
type diskFacts struct {
	size resource.Quantity
	// grow are the claims that ask for less than the size.
	grow []*events.Disk
	// larger names the claims that ask for more than the size: kept as they are.
	larger []string
	// claims is each own claim's size, for the status.
	claims []v1alpha1.ClaimSize
	// expanding names the claims that ask for the size but have yet to reach it; failed says
	// which claims failed to expand, and what they say.
	expanding, failed []string
	// noExpansion: claims must grow, and the class does not allow it.
	noExpansion bool
	// template: the StatefulSet's claim template asks for another size than the spec: members
	// it creates would get disks of the old size until it is created again.
	template bool
	// fsKept is the v1alpha1.AnnotationFilesystemResize the members' template carries (the
	// workload's, or its members' while it is being created again); fsPending: a member's claim
	// waits for the member to start again to grow its filesystem.
	fsKept    string
	fsPending bool
	// fsWait: the soonest a claim's filesystem, waiting for its node, has waited OnlineGrowGrace.
	fsWait time.Duration
}

// OnlineGrowGrace is how long a claim's expanded volume may wait for the kubelet to grow its
// filesystem while its member runs (online, where the driver can) before the members are
// started again to grow it. On real nodes an online growth was seen by the member 1.2 to 30.1 s
// after the size changed.
const OnlineGrowGrace = 2 * time.Minute

// resizing: some claim is below the size or on its way to it.
func (d *diskFacts) resizing() bool {
	return len(d.grow) > 0 || len(d.expanding) > 0 || len(d.failed) > 0
}

func computeDisks(v *events.View) diskFacts {
	var dx diskFacts
	f := v.Fleet
	st := f.Spec.Storage
	if f.Spec.Profile != v1alpha1.ProfilePersistentFleet || st == nil {
		return dx
	}
	dx.size = st.Size
	owner := map[string]string{}
	for i := range v.Members {
		if m := &v.Members[i]; m.ClaimName != "" {
			owner[m.ClaimName] = m.Name
		}
	}
	for i := range v.Disks {
		d := &v.Disks[i]
		if !ownDisk(f, d) || d.Terminating {
			continue
		}
		c := v1alpha1.ClaimSize{Claim: d.Name, Member: owner[d.Name], Resize: d.Resize, Message: d.ResizeMessage}
		if !d.Requested.IsZero() {
			c.Requested = d.Requested.String()
		}
		if !d.Capacity.IsZero() {
			c.Capacity = d.Capacity.String()
		}
		want := dx.size
		switch cmp := d.Requested.Cmp(dx.size); {
		case d.Requested.IsZero():
			// A claim that asks for nothing readable is not the operator's to set.
		case cmp < 0:
			dx.grow = append(dx.grow, d)
		case cmp > 0:
			dx.larger = append(dx.larger, d.Name)
			want = d.Requested
		}
		switch {
		case owner[d.Name] == "":
		case d.NodeResizeFailed:
			// The kubelet could not grow it while its member runs: the member's next start
			// does, when the kubelet mounts the volume again.
			dx.fsPending = true
		case d.Resize == events.ResizeFileSystemPending:
			// The resizer marks every expanded volume so, and the kubelet grows a mounted one
			// while its member runs where the driver can: only a filesystem still waiting past
			// the grace needs its member started again.
			if left := d.ResizePendingSince.Add(OnlineGrowGrace).Sub(v.Now); left > 0 {
				if dx.fsWait == 0 || left < dx.fsWait {
					dx.fsWait = left
				}
			} else {
				dx.fsPending = true
			}
		}
		switch {
		case d.Resize == events.ResizeFailed:
			dx.failed = append(dx.failed, fmt.Sprintf("%s (%s)", d.Name, d.ResizeMessage))
		case d.Requested.Cmp(dx.size) >= 0 && (d.Resize != "" || (!d.Capacity.IsZero() && d.Capacity.Cmp(want) < 0)):
			dx.expanding = append(dx.expanding, d.Name)
		}
		dx.claims = append(dx.claims, c)
	}
	dx.noExpansion = len(dx.grow) > 0 && v.StorageClassFixed
	w := &v.Workload
	dx.fsKept = w.FilesystemResize
	if !w.Exists {
		for i := range v.Members {
			if s := v.Members[i].FilesystemResize; s != "" {
				dx.fsKept = s
			}
		}
	}
	dx.template = w.Exists && !w.ClaimSize.IsZero() && w.ClaimSize.Cmp(dx.size) < 0
	return dx
}

// templateFleet is the fleet as its existing workload can take it: a StatefulSet's claim
// template is immutable, so the workload is rendered with the size it was created with until it
// is created again (RecreateWorkload), and no apply is ever refused for asking to change it.
// fs, when set, is the v1alpha1.AnnotationFilesystemResize its Pod template carries.
func templateFleet(v *events.View, fs string) *v1alpha1.CelldFleet {
	f := v.Fleet
	w := &v.Workload
	claims := f.Spec.Storage != nil && w.Exists && !w.ClaimSize.IsZero() && w.ClaimSize.String() != f.Spec.Storage.Size.String()
	if !claims && fs == "" && f.Annotations[v1alpha1.AnnotationFilesystemResize] == "" {
		return f
	}
	c := *f
	if claims {
		st := *f.Spec.Storage
		st.Size = w.ClaimSize.DeepCopy()
		c.Spec.Storage = &st
	}
	c.Annotations = map[string]string{}
	for k, val := range f.Annotations {
		if k != v1alpha1.AnnotationFilesystemResize {
			c.Annotations[k] = val
		}
	}
	if fs != "" {
		c.Annotations[v1alpha1.AnnotationFilesystemResize] = fs
	}
	return &c
}

// filesystemResize is the v1alpha1.AnnotationFilesystemResize the members' template gets this
// step: the size, once, when a member's claim waits for the member to start again to grow its
// filesystem and the fleet is settled (the workload's controller then restarts the members one
// at a time); else what the template carries already, so nothing rolls again.
func (p *planner) filesystemResize() string {
	dx, fx := &p.fx.disks, p.fx
	size := dx.size.String()
	if dx.fsPending && dx.fsKept != size && fx.hold == "" && fx.settled() &&
		p.to == v1alpha1.StateSteady && p.observed == v1alpha1.StateSteady {
		return size
	}
	return dx.fsKept
}

// orphans is the size of a StatefulSet the fleet's member Pods outlived (deleted with
// propagation Orphan, to change its claim template, or by a person): one past the highest
// ordinal of a member that is not terminating. The workload is created again at that size, so
// that creating it never takes a member away; a change of size is decided from there.
func orphans(v *events.View) int32 {
	if !render.UsesStatefulSet(&v.Fleet.Spec) {
		return 0
	}
	n := int32(0)
	for i := range v.Members {
		if m := &v.Members[i]; !m.Terminating && m.Ordinal >= 0 && int32(m.Ordinal)+1 > n {
			n = int32(m.Ordinal) + 1
		}
	}
	return n
}

// disks grows the fleet's claims to spec.storage.size, and brings the workload's claim
// template to it once the workload is settled.
func (p *planner) disks() {
	v, fx := p.v, p.fx
	dx := &fx.disks
	if dx.noExpansion {
		p.block("%s", dx.classText(v))
		return
	}
	f := v.Fleet
	for _, d := range dx.grow {
		size := dx.size.DeepCopy()
		p.add(Action{Kind: ResizeDisk, Key: "resize/" + v.Namespace + "/" + d.Name + "/" + string(d.UID) + "/" + size.String(),
			Ref: kinds.Ref{Kind: kinds.PersistentVolumeClaim, Name: d.Name}, UID: d.UID, Size: size,
			// The fleet's generation too: a deletion (the fleet's, or its CRD's at uninstall) raises
			// it, and a deleted fleet's claims are never written, grown or not.
			Premise: &Premise{Fleet: f.Name, FleetGeneration: f.Generation, DiskOf: f.UID, DiskUID: d.UID, DiskBelow: &size}})
	}
	if len(dx.grow) > 0 {
		names := diskNames(claimNames(dx.grow))
		p.add(Action{Kind: RecordEvent, Key: ResizeStartedEventPrefix + dx.size.String(), EventType: "Normal", Reason: "DiskResizeStarted",
			Message: fmt.Sprintf("growing %s to %s (spec.storage.size); each member keeps running on its disk", names, dx.size.String())})
		p.intend("grow %s to %s", names, dx.size.String())
	}
	w := &v.Workload
	if dx.template && w.Deleting {
		// Deleted already, to be created again once the garbage collector let its members go.
		p.intend("create the StatefulSet again with claims of %s once the old one is gone; its members stay as they are", dx.size.String())
		return
	}
	if !dx.template || fx.hold != "" || p.to != v1alpha1.StateSteady || p.observed != v1alpha1.StateSteady || !fx.settled() || p.wroteWorkload() {
		// What the workload waits for is said already (a member to be ready, its rollout).
		return
	}
	if m := otherRevision(v); m != nil {
		// A StatefulSet created anew takes its update revision for the current one, so it would
		// no longer know that members below a held partition run an older revision, and its
		// rollout would never be seen to finish. The claim template waits for the rollout; the
		// claims grow meanwhile.
		p.block("the staged rollout of revision %s to be approved or reverted (member %s runs revision %s) before the StatefulSet is created again with claims of %s",
			w.UpdateRevision, m.Name, m.Revision, dx.size.String())
		return
	}
	ref := kinds.Ref{Kind: kinds.StatefulSet, Namespace: v.Namespace, Name: f.Name}
	p.add(Action{Kind: RecreateWorkload, Key: "recreate/" + v.Namespace + "/" + f.Name + "/" + string(w.UID), Ref: ref,
		UID: w.UID, ResourceVersion: w.ResourceVersion,
		Premise: &Premise{Fleet: f.Name, FleetGeneration: f.Generation, Workload: true, WorkloadExists: true, WorkloadGeneration: w.Generation,
			RolledOut: true, WorkloadRef: ref}})
	p.intend("create the StatefulSet again with claims of %s; its members stay as they are", dx.size.String())
}

// wroteWorkload: this step applies the workload already.
func (p *planner) wroteWorkload() bool {
	for _, a := range p.actions {
		if a.Kind == Apply && kinds.IsWorkload(a.Object) {
			return true
		}
	}
	return false
}

func claimNames(ds []*events.Disk) []string {
	out := make([]string, 0, len(ds))
	for _, d := range ds {
		out = append(out, d.Name)
	}
	return out
}

// classText says why claims do not grow, and what a person may do.
func (dx *diskFacts) classText(v *events.View) string {
	class := v.Fleet.Spec.Storage.StorageClassName
	return fmt.Sprintf("storage class %s does not allow volume expansion, so %s stay as they are below spec.storage.size %s: "+
		"set allowVolumeExpansion: true on the class if its driver can expand volumes (kubectl patch storageclass %s -p '{\"allowVolumeExpansion\":true}'), "+
		"or move the data to a new CelldFleet on a class that can",
		class, diskNames(claimNames(dx.grow)), dx.size.String(), class)
}

// diskStatus is the status's account of the fleet's claims while a resize is on its way or held,
// or a claim asks for more than the spec: a fleet whose claims all have its size shows none, so
// that it costs no status write (at rest, or when an operator that knows of resizes takes over
// from one that did not); kubectl celld status reads each member's size from its claim.
func (p *planner) diskStatus(st *v1alpha1.CelldFleetStatus) {
	dx := &p.fx.disks
	if len(dx.claims) == 0 || (!dx.resizing() && !dx.noExpansion && len(dx.larger) == 0) {
		return
	}
	if st.Disks == nil {
		st.Disks = &v1alpha1.DiskAudit{}
	}
	st.Disks.Size = dx.size.String()
	st.Disks.Claims = dx.claims
	st.Disks.Larger = dx.larger
}

// resizingCondition is DisksResizing, True while a claim is below the size or on its way to it,
// with what holds it and what to do; absent otherwise (a class that forbids the resize is
// Degraded's to say), so a fleet that never resizes carries no condition for it.
func (p *planner) resizingCondition(cond func(t string, ok bool, reason, msg string) metav1.Condition) *metav1.Condition {
	dx := &p.fx.disks
	if !dx.resizing() || dx.noExpansion {
		return nil
	}
	var c metav1.Condition
	switch {
	case len(dx.failed) > 0:
		c = cond(v1alpha1.ConditionDisksResizing, true, ReasonExpansionFailed, "expanding "+strings.Join(dx.failed, ", ")+
			" failed: see kubectl describe pvc for the resizer's events; the claims keep asking for the new size and the resizer retries, "+
			"or, once the cause is fixed (the volume's quota, the driver), the expansion goes on by itself")
	case len(dx.grow) > 0:
		c = cond(v1alpha1.ConditionDisksResizing, true, ReasonDisksBelowSize, diskNames(claimNames(dx.grow))+" ask for less than "+dx.size.String()+": growing them")
	case len(dx.expanding) > 0:
		var why []string
		for _, n := range dx.expanding {
			for _, cl := range dx.claims {
				if cl.Claim == n {
					what := orText(cl.Resize, "expanding")
					if cl.Resize == events.ResizeFileSystemPending {
						what += ": the kubelet grows the filesystem while the member runs if the driver can, else when the member starts again; " +
							"once the fleet is settled the workload's rolling update restarts the members one at a time"
					}
					why = append(why, n+" ("+what+")")
				}
			}
		}
		c = cond(v1alpha1.ConditionDisksResizing, true, ReasonDisksExpanding, "every claim asks for "+dx.size.String()+"; on their way: "+strings.Join(why, ", "))
	}
	return &c
}

// belowSize: the status says a claim asks for or has less than its size (a resize the class held
// back, or one a held status never showed on its way).
func belowSize(st *v1alpha1.CelldFleetStatus) bool {
	d := st.Disks
	if d == nil || d.Size == "" {
		return false
	}
	size, err := resource.ParseQuantity(d.Size)
	if err != nil {
		return false
	}
	for _, c := range d.Claims {
		for _, s := range []string{c.Requested, c.Capacity} {
			if q, err := resource.ParseQuantity(s); err == nil && q.Cmp(size) < 0 {
				return true
			}
		}
	}
	return false
}

// ResizeStartedEventPrefix and ResizeDoneEventPrefix start the keys of the Events that a resize
// started and ended.
const (
	ResizeStartedEventPrefix = "event/resize/started/"
	ResizeDoneEventPrefix    = "event/resize/done/"
)

// resizeEvent is the Event of a resize that ended: the published status said it was on its way,
// or this machine announced it (announced) and has not told of its end yet (told). Its start is
// told with the writes that start it.
func resizeEvent(published *v1alpha1.CelldFleetStatus, dx *diskFacts, announced, told string) (Action, bool) {
	size := dx.size.String()
	was := apimeta.IsStatusConditionTrue(published.Conditions, v1alpha1.ConditionDisksResizing) || belowSize(published) || announced == size
	if !was || told == size || dx.resizing() || dx.noExpansion || len(dx.claims) == 0 {
		return Action{}, false
	}
	return Action{Kind: RecordEvent, Key: ResizeDoneEventPrefix + size, EventType: "Normal", Reason: "DiskResized",
		Message: "every disk of the fleet has the size it asks for, at least " + size}, true
}

// otherRevision is the first member running another revision than the workload's update
// revision (a staged rollout in flight or held), nil when none does.
func otherRevision(v *events.View) *events.Member {
	for i := range v.Members {
		if m := &v.Members[i]; m.Revision != "" && m.Revision != v.Workload.UpdateRevision {
			return m
		}
	}
	return nil
}
