package kube

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/celld/celld-operator/api/generated/clientset/versioned"
	celldscheme "github.com/celld/celld-operator/api/generated/clientset/versioned/scheme"
)

// NewClients builds every client from one config, and an event recorder whose broadcaster the
// returned stop function flushes and ends.
func NewClients(cfg *rest.Config) (Clients, func(), error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return Clients{}, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	celld, err := versioned.NewForConfig(cfg)
	if err != nil {
		return Clients{}, nil, fmt.Errorf("celld client: %w", err)
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return Clients{}, nil, fmt.Errorf("metadata client: %w", err)
	}
	metrics, err := metricsclient.NewForConfig(cfg)
	if err != nil {
		return Clients{}, nil, fmt.Errorf("metrics client: %w", err)
	}
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	rec := b.NewRecorder(celldscheme.Scheme, corev1.EventSource{Component: FieldManager})
	return Clients{Kube: kube, Celld: celld, Metadata: meta, Metrics: metrics, Discovery: kube.Discovery(), Recorder: rec}, b.Shutdown, nil
}
