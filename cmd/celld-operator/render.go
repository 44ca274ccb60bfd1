package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/celld/celld-operator/api/v1alpha1"
	"github.com/celld/celld-operator/kinds"
	"github.com/celld/celld-operator/render"
)

func init() {
	register("render", "print the objects a fleet renders to, as YAML (-f fleet.yaml)", func(args []string, stdout, stderr io.Writer) error {
		fs := newFlags("render", stderr)
		file := fs.String("f", "", "the CelldFleet manifest to render (- for stdin)")
		if err := parse(fs, args); err != nil {
			return err
		}
		if *file == "" {
			return errors.New("-f is required: name a CelldFleet manifest, for example -f deploy/samples/bucket-fleet.yaml")
		}
		f, err := readFleet(*file)
		if err != nil {
			return err
		}
		return writeObjects(stdout, f)
	})
}

func readFleet(path string) (*v1alpha1.CelldFleet, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	f := &v1alpha1.CelldFleet{}
	if err := yaml.UnmarshalStrict(data, f); err != nil {
		return nil, fmt.Errorf("%s is not a CelldFleet: %w", path, err)
	}
	if f.Kind != "CelldFleet" || f.APIVersion != v1alpha1.SchemeGroupVersion.String() {
		return nil, fmt.Errorf("%s: kind %q apiVersion %q: want kind CelldFleet, apiVersion %s", path, f.Kind, f.APIVersion, v1alpha1.SchemeGroupVersion)
	}
	if err := validate(f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if f.Namespace == "" {
		f.Namespace = "default"
	}
	if f.UID == "" {
		// The API server assigns the UID; a stand-in makes the rendered labels complete.
		f.UID = types.UID("00000000-0000-0000-0000-000000000000")
	}
	return f, nil
}

// validate repeats the admission rules a manifest read from a file has not been through.
func validate(f *v1alpha1.CelldFleet) error {
	s := &f.Spec
	switch {
	case f.Name == "":
		return errors.New("metadata.name is required")
	case s.Profile != v1alpha1.ProfileBucket && s.Profile != v1alpha1.ProfilePersistentFleet:
		return fmt.Errorf("spec.profile %q: want Bucket or PersistentFleet", s.Profile)
	case s.Members < 1:
		return fmt.Errorf("spec.members %d: want at least 1", s.Members)
	case strings.TrimSpace(s.Image) == "":
		return errors.New("spec.image is required: name the celld image members run")
	case s.Bucket.Name == "" || s.Bucket.Region == "":
		return errors.New("spec.bucket.name and spec.bucket.region are required")
	case s.Profile == v1alpha1.ProfilePersistentFleet && s.Storage == nil:
		return errors.New("spec.storage is required when spec.profile is PersistentFleet: set storageClassName and size")
	case s.Profile == v1alpha1.ProfileBucket && s.Storage != nil:
		return errors.New("spec.storage applies to PersistentFleet only")
	case s.Profile == v1alpha1.ProfilePersistentFleet && s.Workload != "":
		return errors.New("spec.workload applies to Bucket only")
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
