package sim

import (
	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
)

// The inputs a fleet names that a person provides: its ServiceAccount (the simulator keeps no
// ServiceAccount objects, only which exist) and its PriorityClass.

// AddServiceAccount creates a ServiceAccount.
func (c *Cluster) AddServiceAccount(namespace, name string) {
	if c.accounts == nil {
		c.accounts = map[string]bool{}
	}
	c.accounts[key(namespace, name)] = true
}

// DeleteServiceAccount deletes a ServiceAccount.
func (c *Cluster) DeleteServiceAccount(namespace, name string) {
	delete(c.accounts, key(namespace, name))
}

// ServiceAccountMissing reports whether a fleet names a ServiceAccount that does not exist.
func (c *Cluster) ServiceAccountMissing(f *v1alpha1.CelldFleet) bool {
	return f != nil && f.Spec.ServiceAccountName != "" && !c.accounts[key(f.Namespace, f.Spec.ServiceAccountName)]
}

// PriorityClassMissing reports whether a fleet names a PriorityClass that does not exist.
func (c *Cluster) PriorityClassMissing(f *v1alpha1.CelldFleet) bool {
	return f != nil && f.Spec.Pod.PriorityClassName != "" && c.get(kinds.PriorityClass, "", f.Spec.Pod.PriorityClassName) == nil
}
