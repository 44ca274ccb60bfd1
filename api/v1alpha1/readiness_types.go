package v1alpha1

// ReadinessSpec times the readiness probe of every member: how soon a member whose celld stopped
// answering ready counts as away. The fleet's disruption budget counts only Ready members, so
// while a member is away but still counted Ready a drain may evict a second one: the longest
// such window is about periodSeconds × failureThreshold + timeoutSeconds. The install's
// admission policy celld-readiness-default sets 2s, 3 and 1s (about 7s) on a fleet created
// without it. Without it, and for a field it leaves unset, Kubernetes' defaults apply (10s, 3 and
// 1s: about 31s). Setting or changing it rolls the members one at a time.
// +kubebuilder:validation:XValidation:rule="(has(self.timeoutSeconds) ? self.timeoutSeconds : 1) <= (has(self.periodSeconds) ? self.periodSeconds : 10)",message="spec.readiness.timeoutSeconds must be at most spec.readiness.periodSeconds (default 10): a probe that outlasts its period delays the next one"
type ReadinessSpec struct {
	// periodSeconds is how often celld's /readyz is probed. Default 10.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=30
	PeriodSeconds *int32 `json:"periodSeconds,omitempty"`

	// failureThreshold is how many probes in a row must fail before the member counts as not
	// ready. Default 3. A threshold of 1 takes a member that misses one answer under load out of
	// its Service and counts it away.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	FailureThreshold *int32 `json:"failureThreshold,omitempty"`

	// timeoutSeconds is how long one probe waits for celld's answer. Default 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=30
	TimeoutSeconds *int32 `json:"timeoutSeconds,omitempty"`
}
