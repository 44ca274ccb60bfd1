package sim

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/events"
)

// Options tune the cluster. The zero value is a cluster that behaves like a default Kubernetes
// with the faults only the caller injects.
type Options struct {
	// Start is the virtual clock's first reading; 2026-01-01T00:00:00Z when zero.
	Start time.Time
	// RecoveryDelay is how long a started or restarted member takes to report ready (celld
	// recovers before it says ready); 30s when zero.
	RecoveryDelay time.Duration
	// EvictAfter, when positive, is how long a Pod stays on a NotReady or unreachable node before
	// the taint manager requests its deletion (Kubernetes' default toleration is 300s). Zero
	// leaves such Pods alone, which is what a cluster with longer tolerations does.
	EvictAfter time.Duration
	// OrphanPodGCAfter, when positive, is how long a Pod bound to a node that no longer exists
	// survives before the Pod garbage collector force-deletes it (Kubernetes: 40s). Zero keeps
	// such Pods, terminating or not, until someone force-deletes them.
	OrphanPodGCAfter time.Duration
	// OnePerNode places at most one Pod of a fleet (by celld.io/fleet-uid) on a node, whatever
	// the Pod template's topology spread says.
	OnePerNode bool
	// NoDefaults skips the API server's defaulting of applied objects, so the stored spec is
	// exactly what the operator sent.
	NoDefaults bool
}

// Cluster is the in-memory cluster. It is not safe for concurrent use: the caller drives it.
type Cluster struct {
	opts Options
	now  time.Time

	rv, uidSeq, nameSeq, ipSeq uint64

	objs  map[Kind]map[string]object
	byUID map[types.UID]object
	// tombstones hold the last state of the latest object removed under each name, so a
	// resync can tell of deletions a dropped event never delivered.
	tombstones map[Kind]map[string]object

	queue   []Event
	util    map[events.FleetKey]*events.Utilization
	samples []UtilizationSample

	// Kubelet and volume state that Kubernetes keeps outside the objects.
	runtime   map[types.UID]*podRuntime
	claimZone map[types.UID]string
	nodeGone  map[string]time.Time
	// expansionFails names the claims (namespace/name) the resizer fails to expand.
	expansionFails map[string]bool
	// offline names the claims whose filesystems grow only when mounted again.
	offline map[string]bool
	// revisions are the StatefulSets' pod templates by revision name, as ControllerRevisions hold them.
	revisions map[string]corev1.PodTemplateSpec

	broken    map[string]bool
	conflicts int
	refusals  int
	// zombies are member processes on partitioned nodes whose Pods were removed from the API.
	zombies []Zombie

	requests []Request
	recorded []RecordedEvent
	contract contract

	// uninstalling: the CelldFleet CustomResourceDefinition is being deleted or gone;
	// uninstalled are the fleets deleted with it, by UID, with the moment.
	uninstalling bool
	uninstalled  map[types.UID]time.Time
	// accounts are the ServiceAccounts that exist, by namespace/name.
	accounts map[string]bool
}

// New returns an empty cluster: no nodes, no storage classes, no fleets.
func New(opts Options) *Cluster {
	if opts.Start.IsZero() {
		opts.Start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if opts.RecoveryDelay == 0 {
		opts.RecoveryDelay = 30 * time.Second
	}
	c := &Cluster{
		opts:       opts,
		now:        opts.Start,
		objs:       map[Kind]map[string]object{},
		tombstones: map[Kind]map[string]object{},
		byUID:      map[types.UID]object{},
		util:       map[events.FleetKey]*events.Utilization{},
		runtime:    map[types.UID]*podRuntime{},
		claimZone:  map[types.UID]string{},
		nodeGone:   map[string]time.Time{},
		revisions:  map[string]corev1.PodTemplateSpec{},
		broken:     map[string]bool{},
	}
	for _, k := range kindOrder {
		c.objs[k] = map[string]object{}
		c.tombstones[k] = map[string]object{}
	}
	return c
}

// Now is the virtual clock's reading.
func (c *Cluster) Now() time.Time { return c.now }

// Advance moves the clock on and queues a TimePassed event, the machine's only sense of time.
// Nothing else happens until the next Tick.
func (c *Cluster) Advance(d time.Duration) {
	if d < 0 {
		panic(fmt.Sprintf("sim: Advance(%s): the clock only moves forward", d))
	}
	c.now = c.now.Add(d)
	c.queue = append(c.queue, Passed(c.now))
}

// Tick runs every controller once, in a fixed order, at the current time. It reports whether
// anything changed; a controller that made one step waits for the next Tick to see its effect,
// as a real one waits for its informer.
func (c *Cluster) Tick() bool {
	changed := false
	for _, step := range []func() bool{
		c.evictFromUnhealthyNodes,
		c.reapZombies,
		c.collectOrphanPods,
		c.collectOutOfServicePods,
		c.collectGarbage,
		c.bindClaims,
		c.expandClaims,
		c.protectClaims,
		c.syncStatefulSets,
		c.syncDeployments,
		c.schedule,
		c.runKubelets,
	} {
		if step() {
			changed = true
		}
	}
	return changed
}

// maxSettle bounds Settle: controllers that keep changing the cluster with the clock stopped
// are a simulator bug, not a scenario.
const maxSettle = 1000

// Settle ticks until nothing changes and returns how many ticks changed something.
func (c *Cluster) Settle() int {
	for i := 0; i < maxSettle; i++ {
		if !c.Tick() {
			return i
		}
	}
	panic(fmt.Sprintf("sim: cluster still changing after %d ticks at %s", maxSettle, c.now.Format(time.RFC3339)))
}

// Run advances the clock by step and settles, until d has passed.
func (c *Cluster) Run(d, step time.Duration) {
	if step <= 0 {
		panic("sim: Run needs a positive step")
	}
	for passed := time.Duration(0); passed < d; passed += step {
		c.Advance(step)
		c.Settle()
	}
}
