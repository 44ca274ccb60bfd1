package e2e

import "github.com/celld/celld-operator/e2e/contract"

// watchContract starts recording what the contract's judge reads in the fixture's namespace.
// Start it before the fleets it is to judge are created.
func (f *fixture) watchContract() *contract.Contract {
	f.t.Helper()
	return contract.Watch(f.ctx, f.t, suite.kube, suite.celld, f.ns)
}
