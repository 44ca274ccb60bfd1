package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/internal/cli"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/render"
)

func newRender() *cobra.Command {
	var file, namespace string
	c := &cobra.Command{
		Use:   "render -f FILE",
		Short: "Print the objects fleets render to, as YAML (-f fleet.yaml)",
		Long: `render prints the objects the operator would apply for each CelldFleet of a manifest (every
document of a multi-document file), without a cluster. Each fleet is first checked as the API
server checks it on create, against the CRD this binary ships: unknown fields, the schema and its
defaults (applied, so the objects are those of the fleet the API server would store) and the CEL
rules. If any document is refused, nothing is printed.

A fleet without metadata.namespace is rendered in --namespace, or "default". A manifest has no
UID (the API server assigns it); render uses a stand-in, which the output's first lines name.`,
		Example: `  celld-operator render -f deploy/samples/bucket-fleet.yaml
  celld-operator render -f fleets.yaml -n team | kubectl diff -f -
  kubectl get celldfleet alpha -n team -o yaml | celld-operator render -f -`,
		Args: cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if file == "" {
				return cli.Usagef("-f is required: name a CelldFleet manifest, for example -f deploy/samples/bucket-fleet.yaml (- reads stdin)")
			}
			data, err := readInput(file, c.InOrStdin())
			if err != nil {
				return err
			}
			fleets, err := readFleets(file, data, namespace)
			if err != nil {
				return err
			}
			return writeFleets(c.OutOrStdout(), fleets)
		},
	}
	c.Flags().StringVarP(&file, "filename", "f", "", "the manifest of CelldFleets to render, one or more YAML documents (- reads stdin)")
	c.Flags().StringVarP(&namespace, "namespace", "n", "", `the namespace of fleets whose manifest names none (default "default"); a fleet naming another is refused`)
	_ = c.MarkFlagFilename("filename", "yaml", "yml", "json")
	return c
}

func readInput(path string, stdin io.Reader) ([]byte, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return data, nil
}

// fleet is one CelldFleet to render, as the API server would store it.
type fleet struct {
	*v1alpha1.CelldFleet
	// standIn: the manifest has no UID, and the fleet carries a stand-in for the one the API
	// server assigns.
	standIn bool
}

// readFleets reads every document of data, admits each as a CelldFleet and returns them all, or
// an error that lists every refusal (a document that is not a CelldFleet, a fleet the API server
// would refuse), one per line.
func readFleets(path string, data []byte, namespace string) ([]fleet, error) {
	if path == "-" {
		path = "stdin"
	}
	adm, err := fleetAdmission()
	if err != nil {
		return nil, err
	}
	var fleets []fleet
	var refused []string
	seen := map[string]int{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	doc := 0
	for {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			refused = append(refused, fmt.Sprintf("%s: %s", path, flatten(err)))
			break
		}
		js, err := yaml.YAMLToJSONStrict(raw)
		if err != nil {
			doc++
			refused = append(refused, fmt.Sprintf("%s: document %d: %s", path, doc, flatten(err)))
			continue
		}
		if t := bytes.TrimSpace(js); len(t) == 0 || string(t) == "null" {
			continue // an empty document: comments only, or a leading ---
		}
		doc++
		where := fmt.Sprintf("%s: document %d", path, doc)
		f, problems := admitFleet(adm, js, namespace)
		if len(problems) > 0 {
			refused = append(refused, where+": "+problems[0])
			for _, p := range problems[1:] {
				refused = append(refused, "* "+p)
			}
			continue
		}
		key := f.Namespace + "/" + f.Name
		if first, dup := seen[key]; dup {
			refused = append(refused, fmt.Sprintf("%s: CelldFleet %s is also document %d: a namespace holds one fleet of a name", where, key, first))
			continue
		}
		seen[key] = doc
		fleets = append(fleets, f)
	}
	if len(refused) > 0 {
		return nil, errors.New(strings.Join(refused, "\n"))
	}
	if len(fleets) == 0 {
		return nil, fmt.Errorf("%s has no CelldFleet: want at least one document of kind CelldFleet, apiVersion %s", path, v1alpha1.SchemeGroupVersion)
	}
	// The API server assigns the UID; a stand-in makes the rendered owner references and labels
	// complete, one per fleet so that fleets do not seem to own each other's objects.
	n := 0
	for i := range fleets {
		if fleets[i].UID == "" {
			fleets[i].UID = types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", n))
			fleets[i].standIn = true
			n++
		}
	}
	return fleets, nil
}

// admitFleet decodes one JSON document as a CelldFleet in namespace, or returns what is wrong: the
// API server's refusals of the fleet ("The CelldFleet "x" is invalid: ..." first, then one per
// line), or why the document is not a CelldFleet.
func admitFleet(adm *admission, js []byte, namespace string) (fleet, []string) {
	var v any
	if err := utiljson.Unmarshal(js, &v); err != nil {
		return fleet{}, []string{err.Error()}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return fleet{}, []string{fmt.Sprintf("not a Kubernetes object but a %s", jsonKind(v))}
	}
	kind, _ := obj["kind"].(string)
	apiVersion, _ := obj["apiVersion"].(string)
	if kind != "CelldFleet" || apiVersion != v1alpha1.SchemeGroupVersion.String() {
		what := "a " + kind
		if kind == "" {
			what = "an object without a kind"
		}
		return fleet{}, []string{fmt.Sprintf("%s (apiVersion %q), not a CelldFleet: render takes kind CelldFleet, apiVersion %s only", what, apiVersion, v1alpha1.SchemeGroupVersion)}
	}
	meta, ok := obj["metadata"].(map[string]any)
	if !ok && obj["metadata"] != nil {
		return fleet{}, []string{"metadata: want an object"}
	}
	if meta == nil {
		meta = map[string]any{}
		obj["metadata"] = meta
	}
	name, _ := meta["name"].(string)
	// As kubectl does before it sends anything.
	switch ns, _ := meta["namespace"].(string); {
	case namespace != "" && ns != "" && ns != namespace:
		return fleet{}, []string{fmt.Sprintf("the namespace from the provided object %q does not match the namespace %q. You must pass '--namespace=%s' to perform this operation.", ns, namespace, ns)}
	case ns == "" && namespace != "":
		meta["namespace"] = namespace
	case ns == "":
		meta["namespace"] = "default"
	}
	if gen, _ := meta["generateName"].(string); name == "" && gen != "" {
		// The API server would make the name up, and the objects' names derive from it.
		return fleet{}, []string{"metadata.name: Required value: render needs the fleet's name (the API server would generate one from metadata.generateName)"}
	}
	if problems := adm.admit(obj); len(problems) > 0 {
		head := fmt.Sprintf("The CelldFleet %q is invalid: ", name)
		if len(problems) == 1 {
			return fleet{}, []string{head + problems[0]}
		}
		return fleet{}, append([]string{fmt.Sprintf("The CelldFleet %q is invalid (%d errors):", name, len(problems))}, problems...)
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return fleet{}, []string{err.Error()}
	}
	f := &v1alpha1.CelldFleet{}
	if err := json.Unmarshal(data, f); err != nil {
		return fleet{}, []string{fmt.Sprintf("admitted, but does not decode as a CelldFleet: %v", err)}
	}
	return fleet{CelldFleet: f}, nil
}

// flatten puts a multi-line error (the YAML parser's) on one line.
func flatten(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "list"
	case string:
		return "string"
	case bool:
		return "boolean"
	}
	return "number"
}

// writeFleets writes every object of every fleet as YAML documents, the fleets in the order of
// the manifest, after a comment line for each stand-in UID.
func writeFleets(w io.Writer, fleets []fleet) error {
	for _, f := range fleets {
		if f.standIn {
			if _, err := fmt.Fprintf(w, "# uid %s stands in for the one the API server assigns to CelldFleet %s/%s; owner references point at it\n", f.UID, f.Namespace, f.Name); err != nil {
				return err
			}
		}
	}
	for _, f := range fleets {
		// The partition of a staged fleet is decided against the cluster (is a change in flight,
		// was it approved?), which render does not read: say what the 0 it prints stands for.
		if r := f.Spec.Rollout; r != nil && r.Canary < f.Spec.Members {
			hold := f.Spec.Members - r.Canary
			if _, err := fmt.Fprintf(w, "# CelldFleet %s/%s stages its rollouts (spec.rollout.canary %d): the StatefulSet shows partition 0, as applied with no change in flight; a change of its template is held at partition %d (members %d and up updated first) until kubectl celld rollout approve %s\n",
				f.Namespace, f.Name, r.Canary, hold, hold, f.Name); err != nil {
				return err
			}
		}
	}
	for _, f := range fleets {
		if err := writeObjects(w, f.CelldFleet); err != nil {
			return err
		}
	}
	return nil
}

func writeObjects(w io.Writer, f *v1alpha1.CelldFleet) error {
	objs := []kinds.Object{render.RenderReservation(f)}
	objs = append(objs, render.Render(f, f.Spec.Members, -1).All()...)
	for _, o := range objs {
		data, err := yaml.Marshal(o)
		if err != nil {
			return fmt.Errorf("render: %w", err)
		}
		if _, err := fmt.Fprintf(w, "---\n%s", data); err != nil {
			return err
		}
	}
	return nil
}
