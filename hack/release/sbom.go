package main

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// sbom writes an SPDX 2.3 document of the operator's binary: the main module and every module
// linked into it, as the Go toolchain recorded them in the binary (go version -m), with package
// URLs, and the Go standard library of the toolchain that built it.
func (r *release) sbom() error {
	bin := r.binary("amd64")
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return fmt.Errorf("read the build info of %s: %w", bin, err)
	}
	type ref struct {
		Category string `json:"referenceCategory"`
		Type     string `json:"referenceType"`
		Locator  string `json:"referenceLocator"`
	}
	type checksum struct {
		Algorithm string `json:"algorithm"`
		Value     string `json:"checksumValue"`
	}
	type pkg struct {
		Name             string     `json:"name"`
		SPDXID           string     `json:"SPDXID"`
		Version          string     `json:"versionInfo"`
		Supplier         string     `json:"supplier,omitempty"`
		DownloadLocation string     `json:"downloadLocation"`
		FilesAnalyzed    bool       `json:"filesAnalyzed"`
		LicenseConcluded string     `json:"licenseConcluded"`
		LicenseDeclared  string     `json:"licenseDeclared"`
		CopyrightText    string     `json:"copyrightText"`
		Checksums        []checksum `json:"checksums,omitempty"`
		ExternalRefs     []ref      `json:"externalRefs,omitempty"`
		Comment          string     `json:"comment,omitempty"`
	}
	type relationship struct {
		From string `json:"spdxElementId"`
		Type string `json:"relationshipType"`
		To   string `json:"relatedSpdxElement"`
	}
	newPkg := func(path, version, sum string) pkg {
		p := pkg{Name: path, SPDXID: spdxID(path), Version: version, DownloadLocation: "NOASSERTION",
			LicenseConcluded: "NOASSERTION", LicenseDeclared: "NOASSERTION", CopyrightText: "NOASSERTION",
			ExternalRefs: []ref{{"PACKAGE-MANAGER", "purl", "pkg:golang/" + path + "@" + version}}}
		if sum != "" {
			p.Comment = "go.sum hash " + sum
		}
		return p
	}
	binSum, err := fileSHA256(bin)
	if err != nil {
		return err
	}
	main := newPkg(info.Main.Path, r.version, "")
	main.Checksums = []checksum{{"SHA256", binSum}}
	main.Comment = "the celld-operator binary for linux/amd64 (the linux/arm64 one links the same modules), built from commit " + r.commit
	main.DownloadLocation = "git+https://github.com/celld/celld-operator@" + r.commit
	pkgs := []pkg{main}
	rels := []relationship{{"SPDXRef-DOCUMENT", "DESCRIBES", main.SPDXID}}
	deps := append([]*struct{ path, version, sum string }{}, &struct{ path, version, sum string }{"stdlib", info.GoVersion, ""})
	for _, d := range info.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		deps = append(deps, &struct{ path, version, sum string }{d.Path, d.Version, d.Sum})
	}
	sort.Slice(deps, func(i, j int) bool { return deps[i].path < deps[j].path })
	for _, d := range deps {
		p := newPkg(d.path, d.version, d.sum)
		pkgs = append(pkgs, p)
		rels = append(rels, relationship{main.SPDXID, "DEPENDS_ON", p.SPDXID})
	}
	doc := map[string]any{
		"spdxVersion":       "SPDX-2.3",
		"dataLicense":       "CC0-1.0",
		"SPDXID":            "SPDXRef-DOCUMENT",
		"name":              "celld-operator-" + r.version,
		"documentNamespace": "https://github.com/celld/celld-operator/spdx/" + r.version + "-" + binSum[:16],
		"creationInfo": map[string]any{
			"created":  r.created.Format(time.RFC3339),
			"creators": []string{"Tool: celld-operator hack/release", "Organization: celld"},
		},
		"documentDescribes": []string{main.SPDXID},
		"packages":          pkgs,
		"relationships":     rels,
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(r.out, fmt.Sprintf("celld-operator-%s.spdx.json", r.version)), append(data, '\n'), 0o644)
}

var spdxUnsafe = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// spdxID makes a module path an SPDX identifier (letters, digits, dots and hyphens only).
func spdxID(path string) string {
	return "SPDXRef-Package-" + strings.Trim(spdxUnsafe.ReplaceAllString(path, "-"), "-")
}

func fileSHA256(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// checksums writes SHA256SUMS of every file of the release, in the format sha256sum -c reads.
func (r *release) checksums() error {
	entries, err := os.ReadDir(r.out)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, e := range entries {
		if e.IsDir() || e.Name() == "SHA256SUMS" {
			continue
		}
		sum, err := fileSHA256(filepath.Join(r.out, e.Name()))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, e.Name())
	}
	return os.WriteFile(filepath.Join(r.out, "SHA256SUMS"), []byte(b.String()), 0o644)
}
