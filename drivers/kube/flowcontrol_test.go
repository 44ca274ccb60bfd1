package kube

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// An API server under priority and fairness names the flow schema each answer matched, a refusal
// too; one without it does not, and an error answer without the header leaves the question open.
func TestServerRunsFlowControl(t *testing.T) {
	cases := []struct {
		name    string
		header  bool
		status  int
		want    bool
		wantErr bool
	}{
		{"priority and fairness", true, http.StatusOK, true, false},
		{"priority and fairness, the identity refused", true, http.StatusForbidden, true, false},
		{"no priority and fairness", false, http.StatusOK, false, false},
		{"an error answer without the header", false, http.StatusInternalServerError, false, true},
		{"a refusal without the header", false, http.StatusForbidden, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var path string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				path = r.URL.Path
				if c.header {
					w.Header().Set(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID, "uid-exempt")
				}
				w.WriteHeader(c.status)
				_, _ = w.Write([]byte("ok"))
			}))
			defer srv.Close()
			got, err := ServerRunsFlowControl(context.Background(), &rest.Config{Host: srv.URL})
			if got != c.want || (err != nil) != c.wantErr {
				t.Errorf("ServerRunsFlowControl = %t, %v; want %t, error %t", got, err, c.want, c.wantErr)
			}
			if path != "/version" {
				t.Errorf("asked %q, want /version", path)
			}
		})
	}
	if _, err := ServerRunsFlowControl(context.Background(), &rest.Config{Host: "http://127.0.0.1:1"}); err == nil {
		t.Error("an API server that cannot be reached: no error")
	}
}

// Sized to a server under priority and fairness, the client that moves fleets has no limiter of
// its own, while the status client keeps --kube-api-qps.
func TestMovingClientUnlimitedUnderFlowControl(t *testing.T) {
	api := newStandIn(t)
	clients, stop, err := NewClients(&rest.Config{Host: api.URL, QPS: 0.001, Burst: 1}, ClientLimits{MovingUnlimited: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { go stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, name := range []string{"alpha-0", "alpha-1", "alpha-2"} {
		if _, err := clients.Kube.CoreV1().Pods("team").Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Fatalf("read %s on the unlimited client that moves fleets: %v", name, err)
		}
	}
	if _, err := clients.Celld.CelldV1alpha1().CelldFleets("team").Get(ctx, "alpha", metav1.GetOptions{}); err != nil {
		t.Fatalf("a celld.io read on the unlimited client that moves fleets: %v", err)
	}
	patch := []byte(`[{"op":"add","path":"/status","value":{}}]`)
	if _, err := clients.Status.CelldV1alpha1().CelldFleets("team").Patch(ctx, "alpha", types.JSONPatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("the first status write: %v", err)
	}
	_, err = clients.Status.CelldV1alpha1().CelldFleets("team").Patch(ctx, "beta", types.JSONPatchType, patch, metav1.PatchOptions{}, "status")
	throttled(t, api, "/celldfleets/beta", err)
}
