package e2e

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"debug/elf"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/validate"

	"github.com/celld/celld-operator/api/v1alpha1"
)

const releaseVersion = "v0.0.0-e2e"

// TestReleaseInstall: make release writes every artifact (the checksums hold, the image carries a
// binary per platform that reports the release's version, the SBOM lists the binary's modules,
// the manifests pin the release's image), then its install manifest and its Helm chart each
// install on the control plane in turn and run a fleet to Ready. kwok runs no container, so the
// installed Deployment's Pods never run the operator: the operator runs as a process instead,
// the amd64 binary taken out of the release's image, on a token of the ServiceAccount the
// release installed, so what it may do is exactly what the release grants (RBAC and the
// reservation admission policy).
//
// Not parallel: the release binds the reservation admission policy in every namespace, which
// would refuse the reservations of the other tests' operators (they run as the administrator).
func TestReleaseInstall(t *testing.T) {
	out := t.TempDir()
	helm := filepath.Join(suite.cp.Bin, "helm")
	if _, err := os.Stat(helm); err != nil {
		t.Fatalf("helm is not built (%v): run cluster/tools.sh helm", err)
	}
	cosign := filepath.Join(suite.cp.Bin, "cosign")
	key := cosignKeyPair(t, cosign)
	// The commit the release builds, read before it does.
	head, err := exec.Command("git", "-C", suite.root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cmd := exec.Command("go", "run", "./hack/release", "-version", releaseVersion, "-out", out,
		"-kubectl", filepath.Join(suite.cp.Bin, "kubectl"), "-helm", helm, "-cyclonedx-gomod", filepath.Join(suite.cp.Bin, "cyclonedx-gomod"),
		"-cosign", cosign, "-cosign-key", filepath.Join(key, "cosign.key"))
	cmd.Dir = suite.root
	cmd.Env = append(os.Environ(), "COSIGN_PASSWORD="+cosignPassword)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/release: %v\n%s", err, b)
	}
	t.Logf("release %s written in %s", releaseVersion, time.Since(start).Round(time.Second))
	binary, imageDigest := checkReleaseArtifacts(t, out)
	t.Run("signatures", func(t *testing.T) { checkSignatures(t, cosign, key, out, strings.TrimSpace(string(head)), imageDigest) })
	t.Run("krew", func(t *testing.T) { checkKrewPlugin(t, out) })
	// Registered first, so it runs after every uninstall: the API server drops a deleted policy
	// binding a moment later, and until then it refuses the reservations of the tests that run
	// next (their operators run as the administrator).
	t.Cleanup(func() { waitReservationPolicyGone(t) })

	nsExisted := true
	if _, err := suite.kube.CoreV1().Namespaces().Get(context.Background(), operatorNamespace, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		nsExisted = false
	}
	if !nsExisted {
		t.Cleanup(func() {
			_ = suite.kube.CoreV1().Namespaces().Delete(context.Background(), operatorNamespace, metav1.DeleteOptions{})
		})
	}
	awaitNamespaceUsable(t, context.Background(), operatorNamespace)
	pinned := "ghcr.io/celld/celld-operator:" + releaseVersion

	t.Run("manifest", func(t *testing.T) {
		manifest := filepath.Join(out, "celld-operator.yaml")
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		if o, err := kubectlCmd(ctx, "apply", "--server-side", "--force-conflicts", "--field-manager", "e2e", "-f", manifest); err != nil {
			t.Fatalf("kubectl apply -f celld-operator.yaml: %v\n%s", err, o)
		}
		t.Cleanup(func() { uninstall(t, manifest) })
		runFleetOnRelease(t, binary, pinned, []*fixture{newFixture(t)}, nil)
	})

	t.Run("helm", func(t *testing.T) {
		chart := filepath.Join(out, "celld-operator-"+strings.TrimPrefix(releaseVersion, "v")+".tgz")
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		h := func(args ...string) {
			t.Helper()
			c := exec.CommandContext(ctx, helm, append(args, "--kubeconfig", suite.kubeconfig)...)
			if b, err := c.CombinedOutput(); err != nil {
				t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, b)
			}
		}
		// A platform's install: the fleets of two teams' namespaces, not a third's, with the
		// platform's toleration and pull secret.
		teamA, teamB, outside := newFixture(t), newFixture(t), newFixture(t)
		// --take-ownership: the suite installed the CRDs, which the chart now installs too.
		h("install", "celld-operator", chart, "--namespace", operatorNamespace, "--create-namespace", "--take-ownership",
			"--set", "namespaceMode=namespaced",
			"--set-json", fmt.Sprintf(`watchNamespaces=[%q,%q]`, teamA.ns, teamB.ns),
			"--set-json", `tolerations=[{"key":"example.com/platform","operator":"Exists","effect":"NoSchedule"}]`,
			"--set-json", `imagePullSecrets=[{"name":"platform-registry"}]`)
		t.Cleanup(func() {
			c := exec.Command(helm, "uninstall", "celld-operator", "--namespace", operatorNamespace, "--wait", "--kubeconfig", suite.kubeconfig)
			if b, err := c.CombinedOutput(); err != nil {
				t.Errorf("helm uninstall: %v\n%s", err, b)
			}
		})
		dep, err := suite.kube.AppsV1().Deployments(operatorNamespace).Get(ctx, "celld-operator", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the installed Deployment: %v", err)
		}
		pod := dep.Spec.Template.Spec
		if len(pod.Tolerations) != 1 || pod.Tolerations[0].Key != "example.com/platform" || pod.Tolerations[0].Effect != corev1.TaintEffectNoSchedule {
			t.Errorf("the installed operator tolerates %+v, want the platform's taint", pod.Tolerations)
		}
		if len(pod.ImagePullSecrets) != 1 || pod.ImagePullSecrets[0].Name != "platform-registry" {
			t.Errorf("the installed operator pulls with %+v, want platform-registry", pod.ImagePullSecrets)
		}
		runFleetOnRelease(t, binary, pinned, []*fixture{teamA, teamB}, outside)
	})
}

// runFleetOnRelease checks the installed Deployment runs the release's image, then runs binary
// on the installed ServiceAccount's token, with the namespaces the Deployment names, and brings a
// fleet of each tenant's namespace to Ready, and deletes them. A fleet of outside, when given, is
// never touched, and the operator is refused nothing: it reads only where it was given a Role.
func runFleetOnRelease(t *testing.T, binary, pinned string, tenants []*fixture, outside *fixture) {
	t.Helper()
	f := tenants[0]
	f.binary = binary
	dep, err := suite.kube.AppsV1().Deployments(operatorNamespace).Get(f.ctx, "celld-operator", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the installed Deployment: %v", err)
	}
	if got := dep.Spec.Template.Spec.Containers[0].Image; got != pinned {
		t.Errorf("the installed Deployment runs %s, want the release's %s", got, pinned)
	}
	// The operator is told what the installed Deployment tells it.
	var args []string
	for _, a := range dep.Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(a, "--namespace=") {
			args = append(args, a)
		}
	}
	if len(tenants) > 1 {
		var names []string
		for _, tf := range tenants {
			names = append(names, tf.ns)
		}
		if want := "--namespace=" + strings.Join(names, ","); len(args) != 1 || args[0] != want {
			t.Fatalf("the installed Deployment passes %v, want %s", args, want)
		}
	}
	// The admission policy takes a moment to load: until then the administrator's reservation
	// is not refused, and a fleet could be bound by an identity the release does not trust.
	probe := &v1alpha1.CelldReservation{ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec: v1alpha1.CelldReservationSpec{FleetName: "probe", FleetUID: "00000000-0000-0000-0000-000000000000", Profile: v1alpha1.ProfileBucket,
			Bucket: v1alpha1.BucketSpec{Name: "probe-bucket", Region: "us-east-1"}}}
	if err := wait.PollUntilContextTimeout(f.ctx, poll, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := suite.celld.CelldV1alpha1().CelldReservations(f.ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "celld operator alone"), nil
	}); err != nil {
		t.Fatalf("the release's reservation policy never refused the administrator's reservation")
	}
	kubeconfig, _ := serviceAccountKubeconfig(t, f.ctx, operatorNamespace, "celld-operator")
	op := f.startOperator(append([]string{"--kubeconfig", kubeconfig, "--leader-elect", "--leader-election-namespace", operatorNamespace}, args...)...)
	var unmanaged *v1alpha1.CelldFleet
	if outside != nil {
		unmanaged = outside.create(outside.newFleet("unmanaged", v1alpha1.ProfileBucket, 2))
	}
	fleets := map[*fixture]*v1alpha1.CelldFleet{}
	for _, tf := range tenants {
		fleets[tf] = tf.create(tf.newFleet("released", v1alpha1.ProfileBucket, 2))
	}
	for _, tf := range tenants {
		got := tf.waitConverged(fleets[tf].Name)
		t.Logf("fleet %s/%s Ready with %d members, on the release's binary and ServiceAccount", tf.ns, got.Name, got.Status.Members.Ready)
	}
	if unmanaged != nil {
		checkUntouched(t, outside, unmanaged.Name)
	}
	if log, err := os.ReadFile(op.LogPath); err != nil {
		t.Error(err)
	} else if refused := regexp.MustCompile(`(?im)^.*forbidden.*$`).FindAllString(string(log), 5); len(refused) > 0 {
		t.Errorf("the operator was refused what the release grants it:\n%s", strings.Join(refused, "\n"))
	}

	// What helm test runs, on the same ServiceAccount: it passes while the operator leads, and
	// fails once it stopped (its Lease released).
	selftest := func(timeout string) (string, error) {
		out, err := exec.Command(binary, "selftest", "--kubeconfig", kubeconfig, "--namespace", operatorNamespace, "--timeout", timeout).CombinedOutput()
		return string(out), err
	}
	if out, err := selftest("1m"); err != nil || !strings.Contains(out, "ok: a replica leads") || !strings.Contains(out, "ok: the CelldFleet CRD is this release's") {
		t.Errorf("selftest of the running release: %v\n%s", err, out)
	}
	for _, tf := range tenants {
		tf.deleteFleet(fleets[tf].Name, true)
	}
	op.stop(t)
	if out, err := selftest("5s"); err == nil || !strings.Contains(out, "a replica leads: ") {
		t.Errorf("selftest with the operator stopped: %v\n%s; want it to fail on the Lease", err, out)
	}
}

// checkUntouched: the operator wrote nothing of a fleet of a namespace it does not manage: no
// finalizer, no status, no workload, no reservation of its bucket.
func checkUntouched(t *testing.T, f *fixture, name string) {
	t.Helper()
	fl, err := f.fleets().Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the fleet %s/%s: %v", f.ns, name, err)
	}
	if len(fl.Finalizers) > 0 || len(fl.Status.Conditions) > 0 || fl.Status.ObservedGeneration != 0 {
		t.Errorf("the operator took on %s/%s outside its namespaces: finalizers %v, status %+v", f.ns, name, fl.Finalizers, fl.Status)
	}
	sets, err1 := suite.kube.AppsV1().StatefulSets(f.ns).List(f.ctx, metav1.ListOptions{})
	deps, err2 := suite.kube.AppsV1().Deployments(f.ns).List(f.ctx, metav1.ListOptions{})
	svcs, err3 := suite.kube.CoreV1().Services(f.ns).List(f.ctx, metav1.ListOptions{})
	if err := errors.Join(err1, err2, err3); err != nil {
		t.Fatal(err)
	}
	if n := len(sets.Items) + len(deps.Items) + len(svcs.Items); n > 0 {
		t.Errorf("%d workloads or Services in %s, which the operator does not manage", n, f.ns)
	}
	res, err := suite.celld.CelldV1alpha1().CelldReservations(f.ns).List(f.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) > 0 {
		t.Errorf("reservations in %s, which the operator does not manage: %d", f.ns, len(res.Items))
	}
}

// uninstall deletes what a release manifest installed, but for its CRDs (every other test's
// fleets live in them) and its namespace (helm installs into it next), and waits until it is gone.
func uninstall(t *testing.T, manifest string) {
	raw, err := os.ReadFile(manifest)
	if err != nil {
		t.Error(err)
		return
	}
	var keep []string
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var obj struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Errorf("%s: %v", manifest, err)
			return
		}
		if obj.Kind != "" && obj.Kind != "CustomResourceDefinition" && obj.Kind != "Namespace" {
			keep = append(keep, doc)
		}
	}
	path := filepath.Join(t.TempDir(), "objects.yaml")
	if err := os.WriteFile(path, []byte(strings.Join(keep, "\n---\n")), 0o644); err != nil {
		t.Error(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if o, err := kubectlCmd(ctx, "delete", "--ignore-not-found", "--wait=true", "-f", path); err != nil {
		t.Errorf("uninstall the release manifest: %v\n%s", err, o)
	}
}

// checkReleaseArtifacts judges the release folder and returns the path of the linux/amd64
// binary taken out of its image, and the image index's digest.
func checkReleaseArtifacts(t *testing.T, dir string) (string, v1.Hash) {
	t.Helper()
	v := releaseVersion
	want := []string{"SHA256SUMS", "celld-operator-crds.yaml", "celld-operator.yaml", "celld-operator-namespaced.yaml",
		"celld-operator-monitoring.yaml", "celld-operator-dashboard.json", "celld-operator-" + strings.TrimPrefix(v, "v") + ".tgz",
		"celld-operator-" + v + ".oci.tar", "celld-operator-" + v + "-linux-amd64.cdx.json", "celld-operator-" + v + "-linux-arm64.cdx.json", "kubectl-celld-linux-amd64", "kubectl-celld-linux-arm64",
		"celld.krew.yaml", "kubectl-celld-linux-amd64.tar.gz", "kubectl-celld-linux-arm64.tar.gz", "kubectl-celld-darwin-amd64.tar.gz", "kubectl-celld-darwin-arm64.tar.gz"}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	for _, w := range want {
		if !contains(got, w) {
			t.Errorf("release: no %s among %v", w, got)
		}
	}
	// Every file has a checksum, and every checksum holds.
	sums, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	summed := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(sums))
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		data, err := os.ReadFile(filepath.Join(dir, name))
		if !ok || err != nil {
			t.Errorf("SHA256SUMS line %q: %v", sc.Text(), err)
			continue
		}
		h := sha256.Sum256(data)
		if hex.EncodeToString(h[:]) != sum {
			t.Errorf("SHA256SUMS: %s does not match", name)
		}
		summed[name] = true
	}
	// What signs SHA256SUMS cannot be in it.
	signing := map[string]bool{"SHA256SUMS": true, "SHA256SUMS.sigstore.json": true, "SHA256SUMS.provenance.sigstore.json": true, "cosign.pub": true}
	for _, n := range got {
		if !signing[n] && !summed[n] {
			t.Errorf("SHA256SUMS has no line for %s", n)
		}
	}
	// The manifests pin the release's image, never :latest.
	for _, m := range []string{"celld-operator.yaml", "celld-operator-namespaced.yaml"} {
		data, _ := os.ReadFile(filepath.Join(dir, m))
		if !strings.Contains(string(data), "image: ghcr.io/celld/celld-operator:"+v+"\n") || strings.Contains(string(data), ":latest") {
			t.Errorf("%s does not pin ghcr.io/celld/celld-operator:%s", m, v)
		}
	}
	// An SBOM per platform describes that binary and lists the modules it links, each with the
	// license found in its source.
	for _, arch := range []string{"amd64", "arm64"} {
		name := "celld-operator-" + v + "-linux-" + arch + ".cdx.json"
		var sbom struct {
			BOMFormat   string `json:"bomFormat"`
			SpecVersion string `json:"specVersion"`
			Metadata    struct {
				Component struct{ Name, Version, Purl string }
			}
			Components []struct {
				Name, Version, Purl string
				Licenses            []struct {
					License struct{ ID, Name string }
				}
			}
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("SBOM: %v", err)
			continue
		}
		if err := json.Unmarshal(data, &sbom); err != nil {
			t.Fatalf("SBOM %s: %v", name, err)
		}
		main := sbom.Metadata.Component
		if sbom.BOMFormat != "CycloneDX" || main.Name != "github.com/celld/celld-operator" || main.Version != v || !strings.Contains(main.Purl, "goarch="+arch) {
			t.Errorf("SBOM %s: %s %s describes %s %s (%s), want the operator %s for %s", name, sbom.BOMFormat, sbom.SpecVersion, main.Name, main.Version, main.Purl, v, arch)
		}
		found := map[string]bool{}
		var unlicensed []string
		for _, c := range sbom.Components {
			found[c.Name] = true
			// The Go standard library is the toolchain's, which the SBOM names by version.
			if c.Name != "std" && (len(c.Licenses) == 0 || c.Licenses[0].License.ID+c.Licenses[0].License.Name == "") {
				unlicensed = append(unlicensed, c.Name+"@"+c.Version)
			}
		}
		for _, m := range []string{"k8s.io/client-go", "github.com/prometheus/client_golang", "github.com/rs/zerolog", "std"} {
			if !found[m] {
				t.Errorf("SBOM %s: no module %s", name, m)
			}
		}
		if len(unlicensed) > 0 || len(sbom.Components) < 20 {
			t.Errorf("SBOM %s: %d modules, these without a license: %v", name, len(sbom.Components), unlicensed)
		}
	}
	return checkImage(t, filepath.Join(dir, "celld-operator-"+v+".oci.tar"))
}

// checkImage loads the OCI archive with go-containerregistry, as a registry client would, and
// validates every digest and size of the index, the per-platform manifests, configs and layers.
// Each image runs the binary of its platform as the non-root user its /etc/passwd names, with
// the CA certificates and a writable /tmp; the amd64 binary must say the release's version. It
// returns that binary and the index's digest.
func checkImage(t *testing.T, archive string) (string, v1.Hash) {
	t.Helper()
	dir := t.TempDir()
	for name, f := range untar(t, archive) {
		if strings.HasSuffix(name, "/") {
			continue
		}
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, f.data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("image: the archive is no OCI layout: %v", err)
	}
	topManifest, err := top.IndexManifest()
	if err != nil || len(topManifest.Manifests) != 1 {
		t.Fatalf("image: index.json: %v, %+v", err, topManifest)
	}
	if ref := topManifest.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; ref != releaseVersion {
		t.Errorf("image: ref.name %q, want %s", ref, releaseVersion)
	}
	index, err := top.ImageIndex(topManifest.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Index(index); err != nil {
		t.Fatalf("image: the index does not hold: %v", err)
	}
	im, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	var amd64 string
	for _, m := range im.Manifests {
		if m.Platform == nil || m.Platform.OS != "linux" {
			t.Errorf("image: manifest %s has no linux platform", m.Digest)
			continue
		}
		arch := m.Platform.Architecture
		img, err := index.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		config, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if config.Architecture != arch || strings.Join(config.Config.Entrypoint, " ") != "/celld-operator" || config.Config.User != "65532:65532" {
			t.Errorf("image %s: config %+v", arch, config.Config)
		}
		if got := dockerfileStart(t); !reflect.DeepEqual(got, [3]string{fmt.Sprint(config.Config.Entrypoint), fmt.Sprint(config.Config.Cmd), config.Config.User}) {
			t.Errorf("image %s: entrypoint %v, cmd %v, user %s; the Dockerfile's image starts with %v", arch, config.Config.Entrypoint, config.Config.Cmd, config.Config.User, got)
		}
		fsys := flatten(t, img)
		if f := fsys["celld-operator"]; f.mode != 0o755 {
			t.Errorf("image %s: /celld-operator mode %o, want 755", arch, f.mode)
		}
		if !strings.Contains(string(fsys["etc/passwd"].data), ":65532:65532:") {
			t.Errorf("image %s: /etc/passwd names no user 65532:\n%s", arch, fsys["etc/passwd"].data)
		}
		if roots := x509.NewCertPool(); !roots.AppendCertsFromPEM(fsys["etc/ssl/certs/ca-certificates.crt"].data) {
			t.Errorf("image %s: no CA certificate in /etc/ssl/certs/ca-certificates.crt", arch)
		}
		if f, ok := fsys["tmp/"]; !ok || f.mode != 0o1777 {
			t.Errorf("image %s: /tmp %+v, want a folder of mode 1777", arch, f)
		}
		bin := fsys["celld-operator"].data
		f, err := elf.NewFile(bytes.NewReader(bin))
		if err != nil || f.Machine != machines[arch] {
			t.Errorf("image %s: /celld-operator is not a %s executable (%v)", arch, machines[arch], err)
			continue
		}
		delete(machines, arch)
		if arch == "amd64" {
			amd64 = filepath.Join(t.TempDir(), "celld-operator")
			if err := os.WriteFile(amd64, bin, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(machines) != 0 || amd64 == "" {
		t.Fatalf("image: no image for %v", machines)
	}
	// version: VERSION, then the commit, the build date and the Go version, each stamped.
	ver, err := exec.Command(amd64, "version").Output()
	if err != nil || !strings.HasPrefix(string(ver), "version: "+releaseVersion+"\n") || strings.Contains(string(ver), "unknown") {
		t.Errorf("the image's binary says %q (%v), want version %s with its commit and build date", ver, err, releaseVersion)
	}
	return amd64, topManifest.Manifests[0].Digest
}

type imageFile struct {
	data []byte
	mode int64
}

// flatten is an image's filesystem, its layers applied in order; a folder's name ends in a slash.
func flatten(t *testing.T, img v1.Image) map[string]imageFile {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	return readTar(t, rc)
}

func untar(t *testing.T, path string) map[string]imageFile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return readTar(t, f)
}

// readTar reads a tarball's files and folders; a folder's name ends in a slash.
func readTar(t *testing.T, r io.Reader) map[string]imageFile {
	t.Helper()
	files := map[string]imageFile{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(h.Name, "./")
		switch h.Typeflag {
		case tar.TypeDir:
			files[strings.TrimSuffix(name, "/")+"/"] = imageFile{mode: h.Mode}
		case tar.TypeReg:
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[name] = imageFile{data: data, mode: h.Mode}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// waitReservationPolicyGone waits until the administrator's reservation is no longer refused by
// the release's reservation policy.
func waitReservationPolicyGone(t *testing.T) {
	t.Helper()
	probe := &v1alpha1.CelldReservation{ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec: v1alpha1.CelldReservationSpec{FleetName: "probe", FleetUID: "00000000-0000-0000-0000-000000000000", Profile: v1alpha1.ProfileBucket,
			Bucket: v1alpha1.BucketSpec{Name: "probe-bucket", Region: "us-east-1"}}}
	err := wait.PollUntilContextTimeout(context.Background(), poll, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := suite.celld.CelldV1alpha1().CelldReservations("default").Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil || !strings.Contains(err.Error(), "celld operator alone"), nil
	})
	if err != nil {
		t.Errorf("the release's reservation policy still refuses the administrator's reservations 2m after its uninstall")
	}
}

// checkKrewPlugin installs the release's kubectl plugin with krew, as a user does, from the
// release's manifest and its Linux amd64 archive (krew checks the archive's checksum against
// the manifest's), and runs it; a tampered archive is refused. The manifest names an archive for
// Linux and macOS on amd64 and arm64, each with the checksum of the file the release wrote.
func checkKrewPlugin(t *testing.T, dir string) {
	krew := filepath.Join(suite.cp.Bin, "krew")
	if _, err := os.Stat(krew); err != nil {
		t.Fatalf("krew is not built (%v): run cluster/tools.sh krew", err)
	}
	manifest := filepath.Join(dir, "celld.krew.yaml")
	b, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Metadata struct{ Name string }
		Spec     struct {
			Version   string
			Platforms []struct {
				Selector struct {
					MatchLabels map[string]string `json:"matchLabels"`
				}
				URI, SHA256, Bin string
			}
		}
	}
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", manifest, err)
	}
	if m.Metadata.Name != "celld" || m.Spec.Version != releaseVersion {
		t.Errorf("krew manifest: plugin %q version %q, want celld %s", m.Metadata.Name, m.Spec.Version, releaseVersion)
	}
	platforms := map[string]bool{}
	for _, p := range m.Spec.Platforms {
		goos, arch := p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]
		platforms[goos+"/"+arch] = true
		file := "kubectl-celld-" + goos + "-" + arch + ".tar.gz"
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Errorf("krew manifest names %s/%s, and the release has no %s: %v", goos, arch, file, err)
			continue
		}
		h := sha256.Sum256(data)
		if p.SHA256 != hex.EncodeToString(h[:]) || !strings.HasSuffix(p.URI, "/"+releaseVersion+"/"+file) || p.Bin != "kubectl-celld" {
			t.Errorf("krew manifest for %s/%s: uri %s, sha256 %s, bin %s; want .../%s/%s, %x, kubectl-celld", goos, arch, p.URI, p.SHA256, p.Bin, releaseVersion, file, h)
		}
	}
	for _, want := range []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"} {
		if !platforms[want] {
			t.Errorf("krew manifest: no archive for %s (has %v)", want, platforms)
		}
	}

	install := func(archive string) (string, string, error) {
		root := t.TempDir()
		c := exec.Command(krew, "install", "--manifest="+manifest, "--archive="+archive)
		c.Env = append(os.Environ(), "KREW_ROOT="+root)
		out, err := c.CombinedOutput()
		return root, string(out), err
	}
	root, out, err := install(filepath.Join(dir, "kubectl-celld-linux-amd64.tar.gz"))
	if err != nil {
		t.Fatalf("krew install: %v\n%s", err, out)
	}
	help, err := exec.Command(filepath.Join(root, "bin", "kubectl-celld"), "status", "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(help), "kubectl celld status FLEET") {
		t.Errorf("the plugin krew installed: %v\n%s", err, help)
	}

	tampered := filepath.Join(t.TempDir(), "kubectl-celld-linux-amd64.tar.gz")
	data, err := os.ReadFile(filepath.Join(dir, "kubectl-celld-linux-amd64.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tampered, append(data, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, out, err := install(tampered); err == nil || !strings.Contains(out, "checksum does not match") {
		t.Errorf("krew installed a tampered archive (%v):\n%s", err, out)
	}
}

const cosignPassword = "e2e-release-key"

// cosignKeyPair makes a cosign key pair, as a release manager does once, and returns its folder.
func cosignKeyPair(t *testing.T, cosign string) string {
	t.Helper()
	if _, err := os.Stat(cosign); err != nil {
		t.Fatalf("cosign is not built (%v): run cluster/tools.sh cosign", err)
	}
	dir := t.TempDir()
	cmd := exec.Command(cosign, "generate-key-pair")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "COSIGN_PASSWORD="+cosignPassword)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cosign generate-key-pair: %v\n%s", err, b)
	}
	return dir
}

// checkSignatures verifies the release as a user does, with cosign and the release manager's
// public key: SHA256SUMS's signature and the provenance attested for it, whose statement names
// SHA256SUMS, the commit built and the image index inside the OCI archive. A SHA256SUMS changed
// by one byte fails both, and a release file changed by one byte no longer matches SHA256SUMS.
func checkSignatures(t *testing.T, cosign, key, dir, commit string, image v1.Hash) {
	pub, err := os.ReadFile(filepath.Join(key, "cosign.pub"))
	if err != nil {
		t.Fatal(err)
	}
	if shipped, err := os.ReadFile(filepath.Join(dir, "cosign.pub")); err != nil || !bytes.Equal(shipped, pub) {
		t.Errorf("the release's cosign.pub is not the signing key's public key (%v)", err)
	}
	verify := func(sums string) (blob, attestation error) {
		run := func(args ...string) error {
			b, err := exec.Command(cosign, args...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("cosign %s: %v\n%s", args[0], err, b)
			}
			return nil
		}
		return run("verify-blob", "--key", filepath.Join(key, "cosign.pub"), "--bundle", filepath.Join(dir, "SHA256SUMS.sigstore.json"),
				"--insecure-ignore-tlog", sums),
			run("verify-blob-attestation", "--key", filepath.Join(key, "cosign.pub"), "--bundle", filepath.Join(dir, "SHA256SUMS.provenance.sigstore.json"),
				"--type", "slsaprovenance1", "--insecure-ignore-tlog", sums)
	}
	sums := filepath.Join(dir, "SHA256SUMS")
	if blob, att := verify(sums); blob != nil || att != nil {
		t.Fatalf("the release does not verify: %v; %v", blob, att)
	}

	data, err := os.ReadFile(sums)
	if err != nil {
		t.Fatal(err)
	}
	tampered := filepath.Join(t.TempDir(), "SHA256SUMS")
	changed := append([]byte(nil), data...)
	changed[0] ^= 1
	if err := os.WriteFile(tampered, changed, 0o644); err != nil {
		t.Fatal(err)
	}
	if blob, att := verify(tampered); blob == nil || att == nil {
		t.Errorf("a SHA256SUMS changed by one byte verifies: signature %v, provenance %v", blob, att)
	}
	chart := "celld-operator-" + strings.TrimPrefix(releaseVersion, "v") + ".tgz"
	file, err := os.ReadFile(filepath.Join(dir, chart))
	if err != nil {
		t.Fatal(err)
	}
	file[len(file)/2] ^= 1
	h := sha256.Sum256(file)
	if bytes.Contains(data, []byte(hex.EncodeToString(h[:])+"  "+chart+"\n")) || !bytes.Contains(data, []byte("  "+chart+"\n")) {
		t.Errorf("SHA256SUMS does not tell a chart changed by one byte from the release's")
	}

	// The statement, read from the bundle's DSSE envelope.
	var bundle struct {
		Base64Signature string `json:"base64Signature"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS.provenance.sigstore.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &bundle); err != nil {
		t.Fatalf("provenance bundle: %v", err)
	}
	envelope, err := base64.StdEncoding.DecodeString(bundle.Base64Signature)
	if err != nil {
		t.Fatalf("provenance bundle: %v", err)
	}
	var dsse struct{ PayloadType, Payload string }
	if err := json.Unmarshal(envelope, &dsse); err != nil {
		t.Fatalf("provenance envelope: %v\n%s", err, envelope)
	}
	payload, err := base64.StdEncoding.DecodeString(dsse.Payload)
	if err != nil {
		t.Fatal(err)
	}
	var statement struct {
		PredicateType string `json:"predicateType"`
		Subject       []struct {
			Digest map[string]string
		}
		Predicate struct {
			BuildDefinition struct {
				ResolvedDependencies []struct {
					Digest map[string]string
				} `json:"resolvedDependencies"`
			} `json:"buildDefinition"`
			RunDetails struct {
				Byproducts []struct {
					Name   string
					Digest map[string]string
				}
			} `json:"runDetails"`
		}
	}
	if err := json.Unmarshal(payload, &statement); err != nil {
		t.Fatalf("provenance statement: %v\n%s", err, payload)
	}
	sumsDigest := sha256.Sum256(data)
	deps, products := statement.Predicate.BuildDefinition.ResolvedDependencies, statement.Predicate.RunDetails.Byproducts
	if statement.PredicateType != "https://slsa.dev/provenance/v1" || len(statement.Subject) != 1 ||
		statement.Subject[0].Digest["sha256"] != hex.EncodeToString(sumsDigest[:]) ||
		len(deps) != 1 || deps[0].Digest["gitCommit"] != commit ||
		len(products) != 1 || products[0].Digest["sha256"] != image.Hex {
		t.Errorf("provenance: %s\nwant SLSA v1 of SHA256SUMS (%x), commit %s, image index %s", payload, sumsDigest, commit, image)
	}
}

// dockerfileStart is how the Dockerfile's image starts: its ENTRYPOINT and CMD (JSON form) and its
// USER, as the image config prints them.
func dockerfileStart(t *testing.T) [3]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(suite.root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var out [3]string
	for _, line := range strings.Split(string(data), "\n") {
		instr, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
		var list []string
		switch instr {
		case "ENTRYPOINT", "CMD":
			if err := json.Unmarshal([]byte(arg), &list); err != nil {
				t.Fatalf("Dockerfile: %s is not in JSON form: %v", line, err)
			}
			out[map[string]int{"ENTRYPOINT": 0, "CMD": 1}[instr]] = fmt.Sprint(list)
		case "USER":
			out[2] = strings.TrimSpace(arg)
		}
	}
	return out
}
