package kube

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/cert"
)

// authCacheTTL is how long an answer of the API server about one token and path is reused: a
// scrape every few seconds costs two reviews a minute, and a revoked right stops working within it.
const authCacheTTL = 30 * time.Second

// Authorize serves h only to requests whose bearer token the API server authenticates
// (TokenReview) and whose identity may get the request's path as a non-resource URL
// (SubjectAccessReview), as the ecosystem's operators guard /metrics: the ClusterRole
// celld-operator-metrics-reader grants get on /metrics. No token is 401, a token without the
// right 403. client must not be a counted or leader-guarded client: a review is no write of the
// operator's, and a standby must answer scrapes too.
func Authorize(h http.Handler, client kubernetes.Interface, log zerolog.Logger) http.Handler {
	a := &authorizer{client: client, log: log, now: time.Now, cache: map[[32]byte]authAnswer{}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || strings.TrimSpace(token) == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="celld-operator"`)
			http.Error(w, "Unauthorized: a bearer token is required", http.StatusUnauthorized)
			return
		}
		code, msg := a.check(r.Context(), strings.TrimSpace(token), r.URL.Path)
		if code != http.StatusOK {
			http.Error(w, msg, code)
			return
		}
		h.ServeHTTP(w, r)
	})
}

type authAnswer struct {
	code int
	msg  string
	at   time.Time
}

type authorizer struct {
	client kubernetes.Interface
	log    zerolog.Logger
	now    func() time.Time

	mu    sync.Mutex
	cache map[[32]byte]authAnswer
}

func (a *authorizer) check(ctx context.Context, token, path string) (int, string) {
	key := sha256.Sum256([]byte(path + "\x00" + token))
	now := a.now()
	a.mu.Lock()
	if ans, ok := a.cache[key]; ok && now.Sub(ans.at) < authCacheTTL {
		a.mu.Unlock()
		return ans.code, ans.msg
	}
	a.mu.Unlock()
	code, msg, err := a.review(ctx, token, path)
	if err != nil {
		// The API server did not answer: refuse, and do not remember it.
		a.log.Error().Err(err).Str("path", path).Msg("authorize a scrape")
		return http.StatusInternalServerError, "cannot authorize the request now"
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, ans := range a.cache {
		if now.Sub(ans.at) >= authCacheTTL {
			delete(a.cache, k)
		}
	}
	a.cache[key] = authAnswer{code: code, msg: msg, at: now}
	return code, msg
}

func (a *authorizer) review(ctx context.Context, token, path string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tr, err := a.client.AuthenticationV1().TokenReviews().Create(ctx,
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return 0, "", fmt.Errorf("token review: %w", err)
	}
	if !tr.Status.Authenticated {
		return http.StatusUnauthorized, "Unauthorized: the token is not valid", nil
	}
	u := tr.Status.User
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := a.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: u.Username, Groups: u.Groups, UID: u.UID, Extra: extra,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: "get"},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return 0, "", fmt.Errorf("subject access review: %w", err)
	}
	if !sar.Status.Allowed || sar.Status.Denied {
		return http.StatusForbidden, fmt.Sprintf("Forbidden: %s may not get %s", u.Username, path), nil
	}
	return http.StatusOK, "", nil
}

// ServingCert is the metrics endpoint's certificate: tls.crt and tls.key of dir when dir is set
// (a Secret mounted by cert-manager or by hand), else a self-signed one made at start, which a
// scraper accepts with insecure_skip_verify or pins.
func ServingCert(dir string) (tls.Certificate, error) {
	if dir != "" {
		crt, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
		c, err := tls.LoadX509KeyPair(crt, key)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("load %s and %s: %w", crt, key, err)
		}
		return c, nil
	}
	host, _ := os.Hostname()
	if host == "" {
		host = "celld-operator"
	}
	crtPEM, keyPEM, err := cert.GenerateSelfSignedCertKey(host, []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, []string{"localhost", "celld-operator-metrics"})
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("self-signed certificate: %w", err)
	}
	return tls.X509KeyPair(crtPEM, keyPEM)
}
