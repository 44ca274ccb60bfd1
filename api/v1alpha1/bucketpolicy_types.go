package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CelldBucketPolicy says which namespaces may use which buckets, for clusters that tenants share.
// A cluster administrator writes it; the API server enforces it when a fleet is created, through
// the ValidatingAdmissionPolicy celld-bucket-policy (deploy/rbac/bucket_policy.yaml), whose parameters these are:
// the namespaces it selects may name only the buckets it lists, and the buckets it lists may be
// named only in the namespaces it selects. A fleet must satisfy every policy. With no policy, any
// namespace may name any bucket not reserved already.
//
// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=cbp
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type CelldBucketPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec maps namespaces to the buckets they may use.
	Spec CelldBucketPolicySpec `json:"spec"`
}

// CelldBucketPolicySpec gives the namespaces it selects the buckets it lists, and those alone.
type CelldBucketPolicySpec struct {
	// namespaces this policy selects: a fleet created in one of them may name only a bucket of
	// spec.buckets, and a fleet created anywhere else may name none of them.
	Namespaces NamespaceSelection `json:"namespaces"`

	// buckets the selected namespaces may use. Empty: they may use no bucket.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	Buckets []BucketGrant `json:"buckets,omitempty"`
}

// NamespaceSelection selects namespaces by name, by label, or both (a namespace either selects is
// selected).
//
// +kubebuilder:validation:XValidation:rule="has(self.names) || has(self.selector)",message="spec.namespaces must have names or a selector (selector: {} selects every namespace)"
type NamespaceSelection struct {
	// names of the namespaces selected.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Names []string `json:"names,omitempty"`

	// selector selects the namespaces whose labels match it, as a label selector does; {} selects
	// every namespace.
	// +optional
	Selector *NamespaceLabelSelector `json:"selector,omitempty"`
}

// NamespaceLabelSelector is a label selector over namespaces' labels, written as
// metav1.LabelSelector is (the two requirements are ANDed), with bounds that keep its evaluation at
// admission cheap.
type NamespaceLabelSelector struct {
	// matchLabels: each key must have exactly this value.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.size() <= 317 && self[k].size() <= 63)",message="spec.namespaces.selector.matchLabels: keys are at most 317 characters and values at most 63, as namespace labels are"
	MatchLabels map[string]string `json:"matchLabels,omitempty"`

	// matchExpressions: each requirement must hold.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	MatchExpressions []NamespaceSelectorRequirement `json:"matchExpressions,omitempty"`
}

// NamespaceSelectorRequirement is one requirement on a namespace's label.
//
// +kubebuilder:validation:XValidation:rule="(self.operator == 'In' || self.operator == 'NotIn') == (has(self.values) && size(self.values) > 0)",message="spec.namespaces.selector.matchExpressions[].values must be non-empty for In and NotIn, and absent for Exists and DoesNotExist"
type NamespaceSelectorRequirement struct {
	// key of the label.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	Key string `json:"key"`
	// operator: In, NotIn, Exists or DoesNotExist.
	Operator NamespaceSelectorOperator `json:"operator"`
	// values for In and NotIn.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	Values []string `json:"values,omitempty"`
}

// NamespaceSelectorOperator relates a label to the values of a requirement.
// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
type NamespaceSelectorOperator string

// BucketGrant is the buckets of one name pattern, on one store or on any.
type BucketGrant struct {
	// name of the bucket, or a pattern where * stands for any run of characters, for example
	// team-a-* (a bucket's name is lower case).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9.*-]+$`
	Name string `json:"name"`

	// store the bucket is on, by canonical identity: the endpoint's host, lower case, without
	// scheme, port, path or trailing dot, an IP address in its canonical form, and
	// s3.amazonaws.com for every Amazon S3 endpoint and for the empty endpoint. A fleet's endpoint
	// is compared in the same form, so every spelling of one store is that store. Empty: any store.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="isIP(self) ? ip.isCanonical(self) : self.matches('^[a-z0-9]([a-z0-9_.-]*[a-z0-9])?$')",message="spec.buckets[].store must be a host in canonical form: lower case, without scheme, port, path or trailing dot (minio.example.com), or an IP address in canonical form (10.0.0.1, 2001:db8::1)"
	// +kubebuilder:validation:XValidation:rule="self == 's3.amazonaws.com' || !(self == 'amazonaws.com' || self.endsWith('.amazonaws.com') || self == 'amazonaws.com.cn' || self.endsWith('.amazonaws.com.cn'))",message="spec.buckets[].store: every Amazon S3 endpoint, and the empty endpoint, is the one store s3.amazonaws.com: write that"
	Store string `json:"store,omitempty"`
}

// CelldBucketPolicyList is a list of CelldBucketPolicy.
// +kubebuilder:object:root=true
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type CelldBucketPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CelldBucketPolicy `json:"items"`
}
