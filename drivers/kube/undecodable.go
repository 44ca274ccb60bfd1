package kube

// undecodable reports a celld.io object the operator's types cannot decode, on every channel a
// person may look at: a Warning Event on the object, an error log line naming it, and
// celld_undecodable_objects_total. Every other object is served as usual.
func (c *Controller) undecodable(u Undecodable) {
	handling, what := "skipped", "it is not served until it is fixed: edit or recreate it with values the schema allows"
	if u.StatusDropped {
		handling, what = "status_dropped", "its status is ignored and the object is served without it"
	}
	c.metrics.undecodable.WithLabelValues(u.Kind, handling).Inc()
	ev := c.log.Error().Err(u.Err).Str("kind", u.Kind).Str("namespace", u.Namespace).Str("name", u.Name).Str("handling", handling)
	if u.Kind == "CelldFleet" {
		ev = ev.Str("fleet", u.Name)
	}
	ev.Msg("a celld.io object does not decode")
	if c.ap.Recorder != nil && u.Object != nil {
		c.ap.Recorder.Eventf(u.Object, "Warning", "Undecodable", "%s %s/%s does not decode (%v): %s", u.Kind, u.Namespace, u.Name, u.Err, what)
	}
}
