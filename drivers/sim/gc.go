package sim

// collectGarbage is the garbage collector with background propagation: an object none of whose
// owners exists any more (by UID: an owner deleted and recreated under the same name is another
// owner) gets a default deletion request. An owner kept by a finalizer still exists, so what it
// owns stays until the finalizer goes.
func (c *Cluster) collectGarbage() bool {
	changed := false
	for _, k := range kindOrder {
		for _, o := range c.list(k) {
			refs := o.GetOwnerReferences()
			if len(refs) == 0 || o.GetDeletionTimestamp() != nil {
				continue
			}
			orphan := true
			for _, ref := range refs {
				if _, ok := c.byUID[ref.UID]; ok {
					orphan = false
				}
			}
			if !orphan {
				continue
			}
			if ok, _ := c.delete(k, o.GetNamespace(), o.GetName(), deletion{uid: o.GetUID()}); ok {
				changed = true
			}
		}
	}
	return changed
}
