package kube

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/celld/celld-operator/api/generated/clientset/versioned"
)

func fleetJSON(name, scaleIn, status string) string {
	return fmt.Sprintf(`{"apiVersion":"celld.io/v1alpha1","kind":"CelldFleet","metadata":{"name":%q,"namespace":"ns","uid":"uid-%s","resourceVersion":"5"},`+
		`"spec":{"profile":"Bucket","members":3,"image":"celld:1","bucket":{"name":"b-%s","region":"us-east-1"},"capacity":{"scaleInStabilization":%q}},"status":%s}`,
		name, name, name, scaleIn, status)
}

// TestUndecodableFleetDoesNotStopTheOthers: a list with a fleet whose spec does not decode and
// one whose status does not decode still syncs; the first is left out and reported, the second
// is served without its status, and a watch event that makes a served fleet undecodable removes
// it from the cache.
func TestUndecodableFleetDoesNotStopTheOthers(t *testing.T) {
	good := fleetJSON("good", "5m", `{}`)
	badSpec := fleetJSON("bad-spec", "2562048h", `{}`)
	badStatus := fleetJSON("bad-status", "5m", `{"conditions":[{"type":"Ready","status":"True","reason":"R","message":"","lastTransitionTime":"2026-01-01t00:00:00z"}]}`)
	later := fleetJSON("good", "99999999999999h", `{}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case !strings.Contains(r.URL.Path, "celldfleets"):
			fmt.Fprint(w, `{"apiVersion":"celld.io/v1alpha1","kind":"CelldReservationList","metadata":{"resourceVersion":"1"},"items":[]}`)
			if r.URL.Query().Get("watch") == "true" {
				<-r.Context().Done()
			}
		case r.URL.Query().Get("watch") == "true":
			w.WriteHeader(http.StatusOK)
			fmt.Fprintf(w, `{"type":"MODIFIED","object":%s}`+"\n", later)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		default:
			fmt.Fprintf(w, `{"apiVersion":"celld.io/v1alpha1","kind":"CelldFleetList","metadata":{"resourceVersion":"5"},"items":[%s,%s,%s]}`, good, badSpec, badStatus)
		}
	}))
	defer srv.Close()
	celld, err := versioned.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	real := NewInformers(kubefake.NewClientset(), celld, nil, nil)
	var mu sync.Mutex
	reports := map[string]Undecodable{}
	real.OnUndecodable(func(u Undecodable) {
		mu.Lock()
		reports[u.Namespace+"/"+u.Name] = u
		mu.Unlock()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go real.Fleets.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), real.Fleets.HasSynced) {
		t.Fatal("the fleet cache never synced")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		_, gone := reports["ns/good"]
		mu.Unlock()
		if gone || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	keys := real.Fleets.GetStore().ListKeys()
	mu.Lock()
	defer mu.Unlock()
	if u, ok := reports["ns/bad-spec"]; !ok || u.StatusDropped || u.Kind != "CelldFleet" {
		t.Errorf("the fleet whose spec does not decode was not reported as skipped: %+v", u)
	}
	if u, ok := reports["ns/bad-status"]; !ok || !u.StatusDropped {
		t.Errorf("the fleet whose status does not decode was not reported as served without status: %+v", u)
	}
	if u, ok := reports["ns/good"]; !ok || u.StatusDropped {
		t.Errorf("the fleet made undecodable by a watch event was not reported: %+v", u)
	}
	want := []string{"ns/bad-status"}
	if fmt.Sprint(keys) != fmt.Sprint(want) {
		t.Errorf("cached fleets %v, want %v", keys, want)
	}
	f, err := real.fleetLister.CelldFleets("ns").Get("bad-status")
	if err != nil || len(f.Status.Conditions) != 0 || f.Spec.Members != 3 {
		t.Errorf("bad-status served as %+v (%v), want its spec without status", f, err)
	}
}
