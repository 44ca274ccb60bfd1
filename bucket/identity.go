// Package bucket decides which bucket a fleet's spec.bucket reaches: its canonical identity.
//
// Two spellings that could reach the same bucket must have the same identity, or two fleets write
// one bucket. The identity is therefore deliberately coarse: a false conflict costs a fleet a
// Degraded=BucketReserved condition and a rename, a false distinction costs data.
//
//   - The store is the endpoint's host, and only the host. Scheme, port, user info, path, query
//     and fragment are how a client reaches the store, not which store it is: http://h and
//     https://h:8443/prefix/ are one store, and so are path-style (https://h/bucket) and
//     virtual-host-style (https://bucket.h) spellings of one bucket.
//   - Hosts compare case-insensitively, without a trailing dot, IDNA to ASCII, and IP addresses in
//     their canonical form (IPv6 zero compression and case, IPv4-mapped IPv6 unmapped).
//   - Every Amazon S3 host (anything under amazonaws.com or amazonaws.com.cn) and the empty
//     endpoint (celld's provider default, Amazon S3 in the bucket's region) are one store: Amazon
//     bucket names are global, so the region never separates two buckets of one name.
//   - The region is not part of the identity: for Amazon it names no separate namespace, and any
//     other store is identified by its host. Fleets that name one bucket in two regions conflict.
//   - Bucket names compare case-insensitively (admission allows lower case only).
//
// What cannot be decided from the spec alone is not: two host names (or a name and an address)
// that resolve to one store are two identities. DNS is not consulted; the result must be a pure
// function of the spec so that every operator replica, and the property tests, agree.
package bucket

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"net/url"
	"strings"

	"golang.org/x/net/idna"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// AmazonS3 is the store of every Amazon S3 endpoint and of the empty endpoint.
const AmazonS3 = "s3.amazonaws.com"

// Identity is the canonical identity of a bucket: two buckets are one when their identities are
// equal.
type Identity struct {
	// Store is the canonical host of the object store (AmazonS3 for Amazon S3).
	Store string
	// Name is the bucket's name, lower case.
	Name string
}

// String is the identity as one string, store/name: a bucket name has no slash.
func (id Identity) String() string { return id.Store + "/" + id.Name }

// Of is the canonical identity of b.
func Of(b v1alpha1.BucketSpec) Identity {
	name := strings.ToLower(strings.TrimSpace(b.Name))
	return Identity{Store: Store(b.Endpoint, name), Name: name}
}

// Same reports whether a and b could reach one bucket.
func Same(a, b v1alpha1.BucketSpec) bool { return Of(a) == Of(b) }

// Store is the canonical store an endpoint reaches for bucket name (lower case): its host,
// normalized. An endpoint that does not parse as a URL with a host is its own store, lower-cased
// and trimmed, so it can conflict only with spellings that are the same up to case.
//
// The bucket admission policy (deploy/rbac/bucket_policy.yaml) tells a fleet's store again, in
// CEL, so that the API server can match it against CelldBucketPolicy stores: a change here must be
// made there too, or deploy's TestBucketPolicyStoreIsTheBucketsIdentity fails.
func Store(endpoint, name string) string {
	e := strings.TrimSpace(endpoint)
	if e == "" {
		return AmazonS3
	}
	u, err := url.Parse(e)
	if err != nil || u.Host == "" {
		return strings.ToLower(strings.TrimRight(e, "/"))
	}
	host := canonicalHost(u.Hostname())
	// A virtual-host-style endpoint names the bucket as its first labels.
	if name != "" && strings.HasPrefix(host, name+".") && len(host) > len(name)+1 {
		host = host[len(name)+1:]
	}
	if host == "amazonaws.com" || strings.HasSuffix(host, ".amazonaws.com") ||
		host == "amazonaws.com.cn" || strings.HasSuffix(host, ".amazonaws.com.cn") {
		return AmazonS3
	}
	return host
}

// canonicalHost lower-cases a host, drops a trailing dot, converts an internationalized name to
// ASCII and an IP address to its canonical text.
func canonicalHost(h string) string {
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if h == "" {
		return h
	}
	if ip, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
		return ip.Unmap().WithZone("").String()
	}
	if a, err := idna.Lookup.ToASCII(h); err == nil {
		return strings.TrimSuffix(a, ".")
	}
	return h
}

// ReservationPrefix starts every reservation name derived from an identity.
const ReservationPrefix = "celld-bucket-"

// ReservationName names the CelldReservation of a bucket: ReservationPrefix and the SHA-256 of
// its identity, 77 characters. Every name a bucket can have is 63 characters or fewer and every
// name the operator derived before identities were canonical (the bucket's name, suffixed by a
// dash and 8 hex digits when it had an endpoint) is 72 or fewer, so a derived name never equals
// a bucket's name nor a reservation made under the old naming; two identities share a name only
// if SHA-256 collides.
func ReservationName(id Identity) string {
	sum := sha256.Sum256([]byte(id.String()))
	return ReservationPrefix + hex.EncodeToString(sum[:])
}

// LegacyReservationName is the name the operator gave a bucket's reservation before identities
// were canonical: the raw name, suffixed by a hash of the raw endpoint when it had one. Such
// reservations are still honoured: they are matched by the identity of the bucket they carry,
// never by name; this name is only for tests and for people reading old clusters.
func LegacyReservationName(b v1alpha1.BucketSpec) string {
	if b.Endpoint == "" {
		return b.Name
	}
	sum := sha256.Sum256([]byte(b.Endpoint))
	return b.Name + "-" + hex.EncodeToString(sum[:4])
}
