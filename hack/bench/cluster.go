package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/celld/celld-operator/api/generated/clientset/versioned"
	"github.com/celld/celld-operator/e2e/testenv"
)

// operatorUser is the operator's own identity on the bench cluster. The admin kubeconfig is
// system:masters, whose requests the API server's priority and fairness exempts before any flow
// schema can single them out; a user of its own is what lets the API server count the operator's
// requests apart from the bench's, the controllers' and kwok's.
const operatorUser = "celld-bench-operator"

// Flow schemas that match only the operator's user: the API server counts the requests each one
// dispatches (apiserver_flowcontrol_dispatched_requests_total), which is its own count of the
// operator's writes by verb, and of its reads. apiserver_request_total has no user or user-agent
// label, so it cannot tell the operator from kube-controller-manager writing the same resources.
var writeSchemas = []string{"create", "update", "patch", "delete", "deletecollection"}

func schemaName(verb string) string { return "celld-bench-" + verb }

// Reads (every request but the writes above) are split by API group, as the operator's clients
// are: the celld.io clientset and the Kubernetes one each have their own client-side rate limiter.
const (
	celldReadSchema = "celld-bench-reads-celld"
	readSchema      = "celld-bench-reads"
)

// cluster is the bench's own control plane: the scripts of cluster/, with a cache directory and
// ports of its own, so it never meets another control plane running on this machine (the
// end-to-end tests' on the default ports, say).
type cluster struct {
	*testenv.ControlPlane
	cache string

	opKubeconfig string // the operator's own user
	cfg          *rest.Config
	kube         kubernetes.Interface
	celld        versioned.Interface
}

func newCluster(root string, c *config, log io.Writer) *cluster {
	cache := c.clusterCache
	// Whatever the calling shell exported for another cluster must not leak into this one.
	env := dropEnv(os.Environ(), "KUBECONFIG", "CLUSTER_CACHE", "CLUSTER_BIN", "CLUSTER_BUILD", "CLUSTER_STAGES", "CLUSTER_RUN",
		"APISERVER_PORT", "ETCD_CLIENT_PORT", "ETCD_PEER_PORT", "CONTROLLER_MANAGER_PORT", "SCHEDULER_PORT", "KWOK_PORT", "METRICS_SERVER_PORT", "NODES")
	env = append(env,
		"CLUSTER_CACHE="+cache,
		fmt.Sprintf("APISERVER_PORT=%d", c.ports.apiserver),
		fmt.Sprintf("ETCD_CLIENT_PORT=%d", c.ports.etcdClient),
		fmt.Sprintf("ETCD_PEER_PORT=%d", c.ports.etcdPeer),
		fmt.Sprintf("CONTROLLER_MANAGER_PORT=%d", c.ports.controllerManager),
		fmt.Sprintf("SCHEDULER_PORT=%d", c.ports.scheduler),
		fmt.Sprintf("KWOK_PORT=%d", c.ports.kwok),
		fmt.Sprintf("METRICS_SERVER_PORT=%d", c.ports.metricsServer),
		fmt.Sprintf("NODES=%d", c.nodes),
	)
	// The paths are the ones cluster/env.sh derives from CLUSTER_CACHE, known without running it.
	cp := &testenv.ControlPlane{Root: root, Env: env, Log: log, Bin: filepath.Join(cache, "bin"), Kubeconfig: filepath.Join(cache, "run", "kubeconfig")}
	return &cluster{ControlPlane: cp, cache: cache}
}

func dropEnv(env []string, names ...string) []string {
	out := env[:0:0]
next:
	for _, kv := range env {
		for _, n := range names {
			if strings.HasPrefix(kv, n+"=") {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}

// prepare builds (or reuses) the binaries in the default cache, then gives the bench's cache the
// same binaries and kwok stages. Hard links cost no space; a copy is the fallback across file
// systems. The scripts tell their own processes by the binary's path, which is why the bench's
// cache needs its own bin/ rather than a symlink to the default one.
func (c *cluster) prepare() error {
	build := exec.Command(filepath.Join(c.Root, "cluster", "build.sh"))
	build.Dir = c.Root
	build.Env = dropEnv(os.Environ(), "CLUSTER_CACHE", "CLUSTER_BIN", "CLUSTER_BUILD", "CLUSTER_STAGES", "CLUSTER_RUN")
	build.Stdout, build.Stderr = c.Log, c.Log
	if err := build.Run(); err != nil {
		return fmt.Errorf("cluster/build.sh: %w", err)
	}
	src := filepath.Join(c.Root, ".cache", "cluster")
	for _, dir := range []string{"bin", "stages"} {
		if err := mirrorDir(filepath.Join(src, dir), filepath.Join(c.cache, dir)); err != nil {
			return err
		}
	}
	return nil
}

func mirrorDir(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		s, d := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		if same(s, d) {
			continue
		}
		_ = os.Remove(d)
		if err := os.Link(s, d); err == nil {
			continue
		}
		if err := copyFile(s, d); err != nil {
			return fmt.Errorf("copy %s: %w", s, err)
		}
	}
	return nil
}

// same reports whether two paths are one file (a hard link made earlier) or have equal content
// and mode (a copy made earlier, or a version stamp).
func same(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	if err1 != nil || err2 != nil {
		return false
	}
	if os.SameFile(sa, sb) {
		return true
	}
	if sa.Size() != sb.Size() || sa.Mode() != sb.Mode() || sa.Size() > 1<<20 {
		return false
	}
	x, _ := os.ReadFile(a)
	y, _ := os.ReadFile(b)
	return bytes.Equal(x, y)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst+".tmp", os.O_CREATE|os.O_TRUNC|os.O_WRONLY, st.Mode())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(dst+".tmp", dst)
}

// up starts a fresh instance: whatever an interrupted earlier run left is stopped and its state
// purged, so every run starts from an empty etcd.
func (c *cluster) up(ctx context.Context) error {
	if err := c.Down("--purge"); err != nil {
		return err
	}
	if err := c.Up(); err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", c.Kubeconfig, err)
	}
	// The bench creates hundreds of objects "at once": its own client must not be what paces them.
	cfg.QPS, cfg.Burst = 1000, 2000
	cfg.UserAgent = "celld-bench"
	c.cfg = cfg
	if c.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if c.celld, err = versioned.NewForConfig(cfg); err != nil {
		return err
	}
	if err := c.InstallCRDs(ctx); err != nil {
		return err
	}
	if err := c.operatorIdentity(ctx); err != nil {
		return fmt.Errorf("operator identity: %w", err)
	}
	if err := c.flowSchemas(ctx); err != nil {
		return fmt.Errorf("flow schemas: %w", err)
	}
	return nil
}

// operatorIdentity issues the operator a client certificate of its own user from the cluster's CA,
// writes its kubeconfig, and grants it the ClusterRole that deploy/ installs: the bench runs the
// operator with the permissions it has in a real cluster, not as an administrator.
func (c *cluster) operatorIdentity(ctx context.Context) error {
	run := filepath.Join(c.cache, "run")
	caCert, caKey, err := loadCA(filepath.Join(run, "pki", "ca.crt"), filepath.Join(run, "pki", "ca.key"))
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: operatorUser},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	admin, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		return err
	}
	cl := admin.Clusters[admin.Contexts[admin.CurrentContext].Cluster]
	kc := clientcmdapi.NewConfig()
	kc.Clusters["bench"] = cl
	kc.AuthInfos[operatorUser] = &clientcmdapi.AuthInfo{
		ClientCertificateData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		ClientKeyData:         pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
	kc.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: operatorUser}
	kc.CurrentContext = "bench"
	c.opKubeconfig = filepath.Join(run, operatorUser+".kubeconfig")
	if err := clientcmd.WriteToFile(*kc, c.opKubeconfig); err != nil {
		return err
	}

	if _, err := c.Kubectl(ctx, "apply", "-f", filepath.Join(c.Root, "deploy", "rbac", "cluster_role.yaml")); err != nil {
		return err
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: operatorUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "celld-operator"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: operatorUser}},
	}
	_, err = c.kube.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

func loadCA(certPath, keyPath string) (*x509.Certificate, any, error) {
	cb, err := os.ReadFile(certPath)
	if err != nil {
		return nil, nil, err
	}
	block, _ := pem.Decode(cb)
	if block == nil {
		return nil, nil, fmt.Errorf("%s: no PEM block", certPath)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, nil, err
	}
	kb, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, nil, err
	}
	block, _ = pem.Decode(kb)
	if block == nil {
		return nil, nil, fmt.Errorf("%s: no PEM block", keyPath)
	}
	// openssl genrsa writes PKCS#8 (OpenSSL 3) or PKCS#1 (older).
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		return cert, k, nil
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return cert, k, nil
	}
	if k, err := x509.ParseECPrivateKey(block.Bytes); err == nil {
		return cert, k, nil
	}
	return nil, nil, fmt.Errorf("%s: unsupported key format %q", keyPath, block.Type)
}

// flowSchemas routes the operator user's requests through schemas of their own, one per write
// verb and one for everything else. They use the exempt priority level, as the bench's own admin
// client is: neither path is queued by priority and fairness, so the comparison stays even.
func (c *cluster) flowSchemas(ctx context.Context) error {
	subjects := []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: operatorUser}}}
	mk := func(name string, precedence int32, verbs []string, nonResource bool, groups ...string) *flowcontrolv1.FlowSchema {
		if len(groups) == 0 {
			groups = []string{"*"}
		}
		rule := flowcontrolv1.PolicyRulesWithSubjects{
			Subjects: subjects,
			ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
				Verbs: verbs, APIGroups: groups, Resources: []string{"*"},
				Namespaces: []string{"*"}, ClusterScope: true,
			}},
		}
		if nonResource {
			rule.NonResourceRules = []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}}
		}
		return &flowcontrolv1.FlowSchema{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: flowcontrolv1.FlowSchemaSpec{
				PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "exempt"},
				MatchingPrecedence:         precedence,
				Rules:                      []flowcontrolv1.PolicyRulesWithSubjects{rule},
			},
		}
	}
	var schemas []*flowcontrolv1.FlowSchema
	for i, v := range writeSchemas {
		schemas = append(schemas, mk(schemaName(v), int32(10+i), []string{v}, false))
	}
	schemas = append(schemas, mk(celldReadSchema, 20, []string{"*"}, false, "celld.io"), mk(readSchema, 21, []string{"*"}, true))
	for _, fs := range schemas {
		_, err := c.kube.FlowcontrolV1().FlowSchemas().Create(ctx, fs, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	// The API server's flow-control configuration follows its informer: wait until it reports
	// every schema as not dangling, which it writes once it took the schema in.
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, want := range schemas {
			fs, err := c.kube.FlowcontrolV1().FlowSchemas().Get(ctx, want.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			ok := false
			for _, cond := range fs.Status.Conditions {
				if cond.Type == flowcontrolv1.FlowSchemaConditionDangling && cond.Status == flowcontrolv1.ConditionFalse {
					ok = true
				}
			}
			if !ok {
				return false, nil
			}
		}
		return true, nil
	})
}

// apiserverMetrics reads the API server's /metrics with the admin client.
func (c *cluster) apiserverMetrics(ctx context.Context) (families, error) {
	b, err := c.kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	return parseProm(bytes.NewReader(b))
}

// operatorRequests is the API server's count of the operator user's requests: writes by verb,
// and reads (every other request, watches and discovery included).
type operatorRequests struct {
	writes     map[string]float64
	reads      float64 // every read, celld.io ones included
	celldReads float64
}

func (r operatorRequests) totalWrites() float64 {
	t := 0.0
	for _, v := range r.writes {
		t += v
	}
	return t
}

func (r operatorRequests) sub(o operatorRequests) operatorRequests {
	out := operatorRequests{writes: map[string]float64{}, reads: r.reads - o.reads, celldReads: r.celldReads - o.celldReads}
	for k, v := range r.writes {
		out.writes[k] = v - o.writes[k]
	}
	return out
}

func (c *cluster) operatorRequests(ctx context.Context) (operatorRequests, error) {
	fam, err := c.apiserverMetrics(ctx)
	if err != nil {
		return operatorRequests{}, err
	}
	const name = "apiserver_flowcontrol_dispatched_requests_total"
	if _, ok := fam[name]; !ok {
		return operatorRequests{}, errors.New("the API server does not export " + name)
	}
	out := operatorRequests{writes: map[string]float64{}}
	for _, v := range writeSchemas {
		out.writes[v] = fam.sum(name, map[string]string{"flow_schema": schemaName(v)})
	}
	out.celldReads = fam.sum(name, map[string]string{"flow_schema": celldReadSchema})
	out.reads = out.celldReads + fam.sum(name, map[string]string{"flow_schema": readSchema})
	return out, nil
}
