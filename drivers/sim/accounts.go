package sim

import (
	"github.com/celld/celld-operator/api/v1alpha1"
)

// A fleet's ServiceAccount is an input a person provides; the simulator keeps no ServiceAccount
// objects, only which exist. (Its PriorityClass is an object of the store like any other.)

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
