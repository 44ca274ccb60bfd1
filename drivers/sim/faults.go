package sim

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// Faults the caller injects, each deterministic: the caller draws them from its own seeded
// source. Node faults live in nodes.go, write conflicts in do.go; an operator restart is the
// caller's (it drops its machine and its event store).

// CrashMember restarts a running member's container: it is not ready at once and reports ready
// again after the recovery delay.
func (c *Cluster) CrashMember(namespace, name string) error {
	p := c.pod(namespace, name)
	if p == nil {
		return fmt.Errorf("crash member %s/%s: %w", namespace, name, apierrors.NewNotFound(row(KindPod).Resource, name))
	}
	c.crash(p)
	return nil
}

// BreakImage makes every container running image never become ready (a bad release).
func (c *Cluster) BreakImage(image string) { c.broken[image] = true }

// FixImage undoes BreakImage: containers of that image become ready after the recovery delay.
func (c *Cluster) FixImage(image string) {
	delete(c.broken, image)
	for _, p := range c.pods() {
		if c.brokenPod(p) {
			continue
		}
		for _, ctr := range p.Spec.Containers {
			if ctr.Image == image {
				c.runtimeOf(p.UID).readyAt = c.now.Add(c.opts.RecoveryDelay)
			}
		}
	}
}

// StartBrokenRollout rolls a fleet to an image that never becomes ready.
func (c *Cluster) StartBrokenRollout(namespace, name, image string) error {
	c.BreakImage(image)
	return c.UpdateFleetSpec(namespace, name, func(s *v1alpha1.CelldFleetSpec) { s.Image = image })
}
