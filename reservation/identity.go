package reservation

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

// IdentityOf is the canonical identity of b.
func IdentityOf(b v1alpha1.BucketSpec) Identity {
	name := strings.ToLower(strings.TrimSpace(b.Name))
	return Identity{Store: Store(b.Endpoint, name), Name: name}
}

// SameBucket reports whether a and b could reach one bucket.
func SameBucket(a, b v1alpha1.BucketSpec) bool { return IdentityOf(a) == IdentityOf(b) }

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

// NamePrefix starts every reservation name derived from an identity.
const NamePrefix = "celld-bucket-"

// Name names the CelldReservation of a bucket: NamePrefix and the SHA-256 of
// its identity, 77 characters. Every name a bucket can have is 63 characters or fewer and every
// name the operator derived before identities were canonical (the bucket's name, suffixed by a
// dash and 8 hex digits when it had an endpoint) is 72 or fewer, so a derived name never equals
// a bucket's name nor a reservation made under the old naming; two identities share a name only
// if SHA-256 collides.
func Name(id Identity) string {
	sum := sha256.Sum256([]byte(id.String()))
	return NamePrefix + hex.EncodeToString(sum[:])
}

// LegacyName is the name the operator gave a bucket's reservation before identities
// were canonical: the raw name, suffixed by a hash of the raw endpoint when it had one. Such
// reservations are still honoured: they are matched by the identity of the bucket they carry,
// never by name; this name is only for tests and for people reading old clusters.
func LegacyName(b v1alpha1.BucketSpec) string {
	if b.Endpoint == "" {
		return b.Name
	}
	sum := sha256.Sum256([]byte(b.Endpoint))
	return b.Name + "-" + hex.EncodeToString(sum[:4])
}
