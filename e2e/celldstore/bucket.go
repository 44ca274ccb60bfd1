package celldstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// In bucket durability the bucket is the durable copy: a write is acknowledged once the bucket
// has stored it, and the member's own copy in its data directory (an emptyDir in the Bucket
// profile) is only a working copy, rebuilt from the bucket when the member starts on an empty
// one. Members need one another for nothing.

const (
	keyPrefix    = "keys/"
	claimObject  = "celld/fleet-uid"
	createOnlyOp = "*"
)

var (
	errExists  = errors.New("object exists")
	errForeign = errors.New("the bucket is another fleet's")
)

// bucketClient speaks to a celld-bucket store: objects at <endpoint>/<bucket>/<name>, a listing
// at <endpoint>/<bucket>?prefix=.
type bucketClient struct {
	endpoint, name string
	http           *http.Client
}

// BucketListing is a celld-bucket listing.
type BucketListing struct {
	Objects []string `json:"objects"`
}

func (b *bucketClient) url(object string) string {
	return strings.TrimSuffix(b.endpoint, "/") + "/" + b.name + "/" + object
}

func (b *bucketClient) put(ctx context.Context, object string, value []byte, createOnly bool) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, b.url(object), bytes.NewReader(value))
	if err != nil {
		return err
	}
	if createOnly {
		req.Header.Set("If-None-Match", createOnlyOp)
	}
	resp, err := b.http.Do(req)
	if err != nil {
		return err
	}
	defer drain(resp)
	switch {
	case resp.StatusCode == http.StatusPreconditionFailed:
		return errExists
	case resp.StatusCode/100 != 2:
		return fmt.Errorf("PUT %s: %s", b.url(object), resp.Status)
	}
	return nil
}

func (b *bucketClient) get(ctx context.Context, n *Node, object string) ([]byte, bool, error) {
	return n.getBytes(ctx, b.url(object), 10*time.Second)
}

func (b *bucketClient) list(ctx context.Context, n *Node, prefix string) ([]string, error) {
	var l BucketListing
	err := n.getJSON(ctx, strings.TrimSuffix(b.endpoint, "/")+"/"+b.name+"?prefix="+prefix, &l, 30*time.Second)
	return l.Objects, err
}

// claim makes the bucket this fleet's, or tells whose it is: two fleets writing one bucket would
// each believe the other's keys and deletions their own.
func (n *Node) claim(ctx context.Context) error {
	if n.cfg.FleetUID == "" {
		return nil
	}
	err := n.bucket.put(ctx, claimObject, []byte(n.cfg.FleetUID), true)
	if err != nil && !errors.Is(err, errExists) {
		return err
	}
	owner, _, err := n.bucket.get(ctx, n, claimObject)
	if err != nil {
		return err
	}
	if string(owner) != n.cfg.FleetUID {
		return fmt.Errorf("%w: bucket %s belongs to fleet UID %s", errForeign, n.cfg.Bucket.Name, owner)
	}
	return nil
}

func (n *Node) putBucket(ctx context.Context, key string, value []byte) error {
	n.mu.Lock()
	claimed := n.claimed
	n.mu.Unlock()
	if !claimed {
		return errors.New("the bucket is not claimed for this fleet")
	}
	if err := n.bucket.put(ctx, keyPrefix+key, value, false); err != nil {
		return err
	}
	if err := n.store.Put(key, value); err != nil {
		// Acknowledged all the same: the bucket holds it, and the next round copies it back.
		n.log.Warn().Err(err).Str("key", key).Msg("keeping a working copy")
	}
	return nil
}

// bucketRound copies into the working copy every key the bucket has and it lacks.
func (n *Node) bucketRound(ctx context.Context) {
	n.mu.Lock()
	refused, claimed := n.refused, n.claimed
	n.mu.Unlock()
	if refused != "" {
		return
	}
	if !claimed {
		err := n.claim(ctx)
		n.mu.Lock()
		switch {
		case errors.Is(err, errForeign):
			n.refused = err.Error()
			n.log.Error().Err(err).Msg("refusing to serve")
		case err != nil:
			n.log.Warn().Err(err).Msg("reaching the bucket")
		default:
			n.claimed = true
		}
		n.mu.Unlock()
		if err != nil {
			return
		}
	}
	objects, err := n.bucket.list(ctx, n, keyPrefix)
	if err != nil {
		n.log.Warn().Err(err).Msg("listing the bucket")
		return
	}
	copied, failed := 0, 0
	for _, o := range objects {
		key := strings.TrimPrefix(o, keyPrefix)
		if n.store.Has(key) || !ValidKey(key) {
			continue
		}
		value, ok, err := n.bucket.get(ctx, n, o)
		if err == nil && ok {
			err = n.store.Put(key, value)
		}
		if err != nil || !ok {
			failed++
			continue
		}
		copied++
	}
	if copied > 0 {
		n.log.Info().Int("copied", copied).Int("keys", n.store.Len()).Msg("copied keys from the bucket")
	}
	n.mu.Lock()
	n.bucketOK = time.Now()
	if failed == 0 && ctx.Err() == nil && !n.recovered {
		n.recovered = true
		n.log.Info().Int("keys", n.store.Len()).Msg("caught up")
	}
	n.mu.Unlock()
	if failed > 0 {
		n.log.Warn().Int("failed", failed).Msg("copying keys from the bucket")
	}
	n.noteReadiness(true, "ok")
}
