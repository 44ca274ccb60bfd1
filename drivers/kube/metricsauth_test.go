package kube

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rs/zerolog"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// TestAuthorizeAsksTheAPIServer: /metrics is served only to a token the API server authenticates
// and whose identity may get the path; answers are reused within the cache's life.
func TestAuthorizeAsksTheAPIServer(t *testing.T) {
	kube := kubefake.NewClientset()
	reviews := 0
	kube.PrependReactor("create", "tokenreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		reviews++
		tr := a.(clienttesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		switch tr.Spec.Token {
		case "reader-token":
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "reader", Groups: []string{"g"}}}
		case "nobody-token":
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "nobody"}}
		}
		return true, tr, nil
	})
	kube.PrependReactor("create", "subjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		sar := a.(clienttesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		na := sar.Spec.NonResourceAttributes
		sar.Status.Allowed = sar.Spec.User == "reader" && len(sar.Spec.Groups) == 1 && na != nil && na.Path == "/metrics" && na.Verb == "get"
		return true, sar, nil
	})
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("served")) })
	h := Authorize(ok, kube, zerolog.Nop())
	for _, tc := range []struct {
		what, method, path, token string
		want                      int
	}{
		{"no token", "GET", "/metrics", "", http.StatusUnauthorized},
		{"a token the API server does not know", "GET", "/metrics", "forged", http.StatusUnauthorized},
		{"an identity without the right", "GET", "/metrics", "nobody-token", http.StatusForbidden},
		{"the reader", "GET", "/metrics", "reader-token", http.StatusOK},
		{"the reader again (cached)", "GET", "/metrics", "reader-token", http.StatusOK},
		{"the reader on the profiler", "GET", "/debug/pprof/", "reader-token", http.StatusForbidden},
		{"a write", "POST", "/metrics", "reader-token", http.StatusMethodNotAllowed},
	} {
		req := httptest.NewRequest(tc.method, tc.path, nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("%s: %d %q, want %d", tc.what, rec.Code, rec.Body.String(), tc.want)
		}
		if tc.want == http.StatusOK && rec.Body.String() != "served" {
			t.Errorf("%s: body %q", tc.what, rec.Body.String())
		}
	}
	if reviews != 4 {
		t.Errorf("%d token reviews, want 4 (one per distinct token and path)", reviews)
	}
}

func TestServingCertSelfSigned(t *testing.T) {
	c, err := ServingCert("")
	if err != nil || len(c.Certificate) == 0 {
		t.Fatalf("self-signed certificate: %v", err)
	}
	if _, err := ServingCert(t.TempDir()); err == nil {
		t.Error("a cert dir without tls.crt and tls.key must be an error")
	}
}
