// Command crdversions serves each celld.io CRD that controller-gen wrote (one version, v1alpha1)
// as v1beta1 too, stored as v1beta1: it copies the version, renames the copy and moves storage
// to it. The two versions have the same schema, so the API server converts between them by
// changing apiVersion alone (conversion strategy None) and no conversion webhook is needed; the
// Go types stay those of api/v1alpha1 until the schemas must differ.
//
//	go run ./hack/crdversions deploy/crds/*.yaml
//
// The CRD is edited as text, not re-marshalled, so the file stays as controller-gen formats it;
// every step checks it finds exactly what it expects and fails otherwise.
package main

import (
	"fmt"
	"os"
	"strings"
)

const (
	from = "v1alpha1"
	to   = "v1beta1"
)

func main() {
	for _, path := range os.Args[1:] {
		if err := rewrite(path); err != nil {
			fmt.Fprintf(os.Stderr, "crdversions: %s: %v\n", path, err)
			os.Exit(1)
		}
	}
}

func rewrite(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := addVersion(string(raw))
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(out), 0o644)
}

// addVersion takes a CRD whose spec.versions, the last key of the file, lists v1alpha1 alone
// and stored, and lists after it v1beta1, the same but for its name, stored in its place.
func addVersion(crd string) (string, error) {
	const key = "\n  versions:\n"
	if strings.Count(crd, key) != 1 {
		return "", fmt.Errorf("want one spec.versions, found %d", strings.Count(crd, key))
	}
	head, item, _ := strings.Cut(crd, key)
	// One version: one item, at two spaces, its keys at four.
	if !strings.HasPrefix(item, "  - ") || strings.Count(item, "\n  - ") != 0 {
		return "", fmt.Errorf("want spec.versions to list one version, written by controller-gen")
	}
	for _, line := range strings.Split(strings.TrimRight(item, "\n"), "\n") {
		if line != "" && !strings.HasPrefix(line, "    ") && !strings.HasPrefix(line, "  - ") {
			return "", fmt.Errorf("spec.versions is not the last key of the CRD: %q follows it", line)
		}
	}
	name := "\n    name: " + from + "\n"
	stored := "\n    storage: true\n"
	if strings.Count("\n"+item, name) != 1 || strings.Count(item, stored) != 1 {
		return "", fmt.Errorf("want one version, %s, stored", from)
	}
	old := strings.Replace(item, stored, "\n    storage: false\n", 1)
	next := strings.Replace("\n"+item, name, "\n    name: "+to+"\n", 1)[1:]
	return head + key + old + next, nil
}
