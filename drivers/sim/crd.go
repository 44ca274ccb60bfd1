package sim

import (
	"errors"
	"fmt"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// An uninstall is the CelldFleet CustomResourceDefinition deleted while fleets exist: the API
// server deletes every fleet with it (each stays, being deleted, until its finalizers are
// removed), refuses new fleets while the definition terminates, and the definition is gone once
// the last fleet is. The operator reads it fresh (drivers/kube reads the definition itself).

// Uninstall deletes the CelldFleet CustomResourceDefinition: every fleet is deleted with it. The
// fleets deleted are remembered by UID, with the moment, for the judges: nothing of theirs may
// change from then on but their finalizer.
func (c *Cluster) Uninstall() error {
	if c.uninstalled == nil {
		c.uninstalled = map[types.UID]time.Time{}
	}
	c.uninstalling = true
	for _, o := range c.list(KindFleet) {
		f := o.(*v1alpha1.CelldFleet)
		if _, ok := c.uninstalled[f.UID]; !ok {
			c.uninstalled[f.UID] = c.now
		}
		if _, err := c.delete(KindFleet, f.Namespace, f.Name, deletion{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("uninstall: delete fleet %s/%s: %w", f.Namespace, f.Name, err)
		}
	}
	return nil
}

// Uninstalling reports whether the CelldFleet CustomResourceDefinition is being deleted or is
// gone, as the operator's fresh read of it says.
func (c *Cluster) Uninstalling() bool { return c.uninstalling }

// Reinstall creates the CelldFleet CustomResourceDefinition again. It fails while the old one
// still terminates (a fleet is still there), as the API server refuses to create an object
// that is being deleted.
func (c *Cluster) Reinstall() error {
	if n := len(c.list(KindFleet)); n > 0 {
		return fmt.Errorf("reinstall: the CustomResourceDefinition still terminates, %d fleets left: %w", n, errTerminating)
	}
	c.uninstalling = false
	return nil
}

var errTerminating = errors.New("object is being deleted")

// Uninstalled lists the UIDs of the fleets deleted with their CustomResourceDefinition, each with
// the moment of the uninstall, by UID.
func (c *Cluster) Uninstalled() []UninstalledFleet {
	out := make([]UninstalledFleet, 0, len(c.uninstalled))
	for uid, at := range c.uninstalled {
		out = append(out, UninstalledFleet{UID: uid, At: at})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UID < out[j].UID })
	return out
}

// UninstalledFleet is a fleet deleted with its CustomResourceDefinition.
type UninstalledFleet struct {
	UID types.UID
	At  time.Time
}
