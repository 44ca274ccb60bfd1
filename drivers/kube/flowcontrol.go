package kube

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/client-go/rest"
)

// ServerRunsFlowControl asks the API server whether it runs API Priority and Fairness: every
// request it classifies is answered with the UID of the flow schema it matched, in a response
// header, refused or not (it classifies before it authorizes). It asks for /version, which every
// identity may read. An error means the answer is unknown.
func ServerRunsFlowControl(ctx context.Context, cfg *rest.Config) (bool, error) {
	base, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return false, fmt.Errorf("ask the API server about flow control: %w", err)
	}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return false, fmt.Errorf("ask the API server about flow control: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base.String(), "/")+"/version", nil)
	if err != nil {
		return false, fmt.Errorf("ask the API server about flow control: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, fmt.Errorf("ask the API server about flow control: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID) != "" {
		return true, nil
	}
	if resp.StatusCode != http.StatusOK {
		// Not the API server's own answer, perhaps: a proxy's, or one from before its filters.
		return false, fmt.Errorf("ask the API server about flow control: GET /version answered %s", resp.Status)
	}
	return false, nil
}
