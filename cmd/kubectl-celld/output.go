package main

import (
	"encoding/json"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// outputFormat is the value of -o: empty for the table a person reads, json or yaml for a script.
type outputFormat string

func parseOutput(s string) (outputFormat, error) {
	switch s {
	case "", "json", "yaml":
		return outputFormat(s), nil
	}
	return "", usageError{fmt.Errorf("--output %q: want json or yaml, or no --output for the table", s)}
}

// statusDoc is what `status` shows, as data: the fleet and its reservation as the API server has
// them, and the joins the screen makes (each member's node, zone, readiness, revision and disks).
// A script reads the same facts a person does, with the stable names of the JSON fields.
type statusDoc struct {
	APIVersion string               `json:"apiVersion"`
	Kind       string               `json:"kind"`
	Fleet      *v1alpha1.CelldFleet `json:"fleet"`
	Members    []memberDoc          `json:"members"`
	// Reservation is the one bound to the fleet's UID, null when none is.
	Reservation *v1alpha1.CelldReservation `json:"reservation"`
	// NodesHidden: the reader may not read nodes, so no member's zone is known.
	NodesHidden bool `json:"nodesHidden,omitempty"`
}

type memberDoc struct {
	Pod  string `json:"pod"`
	Node string `json:"node"`
	Zone string `json:"zone"`
	// Ready is whether the member counts as ready, as the operator counts it: its Pod's Ready
	// condition is true and its deletion was not requested.
	Ready    bool        `json:"ready"`
	Deleting bool        `json:"deleting"`
	Revision string      `json:"revision"`
	Disks    []diskDoc   `json:"disks"`
	Created  metav1.Time `json:"created"`
}

type diskDoc struct {
	Claim string `json:"claim"`
	// Phase is the claim's (Bound, Pending, Lost), Missing when no such claim exists, Deleting
	// when its deletion was requested.
	Phase string `json:"phase"`
	// Requested is the claim's storage request, Capacity the size its volume has; empty when
	// unknown.
	Requested string `json:"requested,omitempty"`
	Capacity  string `json:"capacity,omitempty"`
}

// historyDoc is what `history` shows, as data: every capacity decision, oldest first.
type historyDoc struct {
	APIVersion  string                      `json:"apiVersion"`
	Kind        string                      `json:"kind"`
	Namespace   string                      `json:"namespace"`
	Fleet       string                      `json:"fleet"`
	Reservation string                      `json:"reservation"`
	Decisions   []v1alpha1.CapacityDecision `json:"decisions"`
}

// The documents' kinds name what they are; they are no API resource, so no one applies them.
const (
	docAPIVersion  = "celld.io/kubectl-celld/v1"
	statusDocKind  = "FleetStatus"
	historyDocKind = "FleetHistory"
)

func statusDocOf(r *report) statusDoc {
	// As kubectl get -o json shows them: with their kind, without managedFields.
	fl := r.fleet.DeepCopy()
	fl.APIVersion, fl.Kind, fl.ManagedFields = v1alpha1.SchemeGroupVersion.String(), "CelldFleet", nil
	var res *v1alpha1.CelldReservation
	if r.reservation != nil {
		res = r.reservation.DeepCopy()
		res.APIVersion, res.Kind, res.ManagedFields = v1alpha1.SchemeGroupVersion.String(), "CelldReservation", nil
	}
	d := statusDoc{APIVersion: docAPIVersion, Kind: statusDocKind, Fleet: fl, Reservation: res,
		NodesHidden: r.nodesHidden, Members: []memberDoc{}}
	for i := range r.pods {
		p := &r.pods[i]
		m := memberDoc{Pod: p.Name, Node: p.Spec.NodeName, Revision: revision(p), Ready: ready(p) == "true",
			Deleting: p.DeletionTimestamp != nil, Created: p.CreationTimestamp, Disks: []diskDoc{}}
		if m.Revision == "-" {
			m.Revision = ""
		}
		if n := r.nodes[p.Spec.NodeName]; n != nil && !r.nodesHidden {
			m.Zone = n.Labels[corev1.LabelTopologyZone]
		}
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim == nil {
				continue
			}
			name := v.PersistentVolumeClaim.ClaimName
			c := r.claims[name]
			phase := "Missing"
			switch {
			case c == nil:
			case c.DeletionTimestamp != nil:
				phase = "Deleting"
			default:
				phase = string(c.Status.Phase)
			}
			doc := diskDoc{Claim: name, Phase: phase}
			doc.Requested, doc.Capacity = claimSizes(c)
			m.Disks = append(m.Disks, doc)
		}
		d.Members = append(d.Members, m)
	}
	return d
}

func historyDocOf(r *report) historyDoc {
	d := historyDoc{APIVersion: docAPIVersion, Kind: historyDocKind, Namespace: r.fleet.Namespace, Fleet: r.fleet.Name,
		Decisions: []v1alpha1.CapacityDecision{}}
	if r.reservation != nil {
		d.Reservation = r.reservation.Name
		d.Decisions = append(d.Decisions, r.reservation.Status.CapacityHistory...)
	}
	return d
}

// write prints a document as indented JSON, or as YAML.
func write(w io.Writer, format outputFormat, doc any) error {
	b, err := json.MarshalIndent(doc, "", "    ")
	if err != nil {
		return fmt.Errorf("encode the output: %w", err)
	}
	if format == "yaml" {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return fmt.Errorf("encode the output as YAML: %w", err)
		}
	} else {
		b = append(b, '\n')
	}
	_, err = w.Write(b)
	return err
}
