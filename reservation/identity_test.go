package reservation

import (
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/celld/celld-operator/api/v1alpha1"
)

func spec(name, region, endpoint string) v1alpha1.BucketSpec {
	return v1alpha1.BucketSpec{Name: name, Region: region, Endpoint: endpoint}
}

// TestSpellingsOfOneBucket: every spelling in a group reaches the same bucket, so every pair in a
// group has one identity.
func TestSpellingsOfOneBucket(t *testing.T) {
	groups := map[string][]v1alpha1.BucketSpec{
		"amazon": {
			spec("data", "us-east-1", ""),
			spec("data", "eu-west-1", ""),
			spec("data", "us-east-1", "https://s3.amazonaws.com"),
			spec("data", "us-east-1", "https://s3.amazonaws.com/"),
			spec("data", "us-east-1", "https://s3.amazonaws.com//"),
			spec("data", "us-east-1", "HTTPS://S3.AMAZONAWS.COM"),
			spec("data", "us-east-1", "https://s3.amazonaws.com:443"),
			spec("data", "us-east-1", "http://s3.amazonaws.com:80/"),
			spec("data", "us-east-1", "https://s3.amazonaws.com."),
			spec("data", "us-east-1", "https://s3.us-east-1.amazonaws.com"),
			spec("data", "eu-west-1", "https://s3.eu-west-1.amazonaws.com"),
			spec("data", "eu-west-1", "https://s3-eu-west-1.amazonaws.com"),
			spec("data", "eu-west-1", "https://s3.dualstack.eu-west-1.amazonaws.com"),
			spec("data", "us-east-1", "https://s3-fips.us-east-1.amazonaws.com"),
			spec("data", "us-east-1", "https://data.s3.amazonaws.com"),
			spec("data", "us-east-1", "https://data.s3.us-east-1.amazonaws.com/"),
			spec("data", "us-east-1", "https://s3.amazonaws.com/data"),
			spec("data", "us-east-1", "https://s3.amazonaws.com/data/"),
			spec("data", "us-east-1", "https://user@s3.amazonaws.com?x=1#y"),
			spec("data", "us-east-1", " https://s3.amazonaws.com "),
			spec("data", "cn-north-1", "https://s3.cn-north-1.amazonaws.com.cn"),
		},
		"minio by name": {
			spec("data", "us-east-1", "https://minio.example.com"),
			spec("data", "us-east-1", "https://MinIO.Example.Com/"),
			spec("data", "eu-west-1", "https://minio.example.com:443"),
			spec("data", "us-east-1", "http://minio.example.com"),
			spec("data", "us-east-1", "http://minio.example.com:80"),
			spec("data", "us-east-1", "https://minio.example.com:9000"),
			spec("data", "us-east-1", "https://minio.example.com./"),
			spec("data", "us-east-1", "https://minio.example.com/data"),
			spec("data", "us-east-1", "https://minio.example.com/prefix/"),
			spec("data", "us-east-1", "https://data.minio.example.com"),
			spec("DATA", "us-east-1", "https://minio.example.com"),
		},
		"dotted bucket": {
			spec("my.data.v1", "us-east-1", "https://store.example"),
			spec("my.data.v1", "us-east-1", "https://my.data.v1.store.example"),
			spec("my.data.v1", "us-east-1", "https://store.example/my.data.v1"),
		},
		"ipv6": {
			spec("data", "us-east-1", "https://[2001:db8::1]"),
			spec("data", "us-east-1", "https://[2001:DB8:0:0:0:0:0:1]:443/"),
			spec("data", "us-east-1", "http://[2001:db8::1]:9000"),
		},
		"ipv4": {
			spec("data", "us-east-1", "http://10.0.0.1:9000"),
			spec("data", "us-east-1", "https://10.0.0.1"),
			spec("data", "us-east-1", "https://[::ffff:10.0.0.1]"),
		},
		"idn": {
			spec("data", "us-east-1", "https://bücher.example"),
			spec("data", "us-east-1", "https://xn--bcher-kva.example"),
			spec("data", "us-east-1", "https://BÜCHER.example"),
		},
	}
	ids := map[Identity]string{}
	for group, spellings := range groups {
		want := IdentityOf(spellings[0])
		for _, s := range spellings {
			if got := IdentityOf(s); got != want {
				t.Errorf("%s: %+v has identity %s, want %s", group, s, got, want)
			}
			if got, want := Name(IdentityOf(s)), Name(want); got != want {
				t.Errorf("%s: %+v reservation %s, want %s", group, s, got, want)
			}
		}
		if other, ok := ids[want]; ok {
			t.Errorf("groups %s and %s have one identity %s", group, other, want)
		}
		ids[want] = group
	}
}

// TestDistinctBuckets: spellings that cannot reach one bucket keep distinct identities.
func TestDistinctBuckets(t *testing.T) {
	distinct := []v1alpha1.BucketSpec{
		spec("data", "us-east-1", ""),
		spec("data2", "us-east-1", ""),
		spec("data", "us-east-1", "https://minio.example.com"),
		spec("data", "us-east-1", "https://minio.example.org"),
		spec("data", "us-east-1", "https://minio-2.example.com"),
		spec("data", "us-east-1", "https://[2001:db8::2]"),
		spec("data", "us-east-1", "https://storage.googleapis.com"),
		spec("data", "us-east-1", "https://notamazonaws.com"),
	}
	seen := map[Identity]v1alpha1.BucketSpec{}
	names := map[string]v1alpha1.BucketSpec{}
	for _, s := range distinct {
		id := IdentityOf(s)
		if prev, ok := seen[id]; ok {
			t.Errorf("%+v and %+v have one identity %s", prev, s, id)
		}
		seen[id] = s
		n := Name(id)
		if prev, ok := names[n]; ok {
			t.Errorf("%+v and %+v have one reservation name %s", prev, s, n)
		}
		names[n] = s
	}
}

// TestReservationNamesNeverCollide: a derived reservation name is never a bucket's name nor a
// name derived under the old naming, whatever the bucket and endpoint.
func TestReservationNamesNeverCollide(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		name := rapid.StringMatching(`[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]`).Draw(t, "name")
		other := rapid.StringMatching(`[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]`).Draw(t, "other")
		endpoint := rapid.SampledFrom([]string{"", "https://s3.amazonaws.com", "https://minio.example.com:9000/", "http://[::1]"}).Draw(t, "endpoint")
		n := Name(IdentityOf(spec(name, "us-east-1", endpoint)))
		if len(n) > 253 || !strings.HasPrefix(n, NamePrefix) {
			t.Fatalf("reservation name %q is not a valid, prefixed object name", n)
		}
		for _, legacy := range []string{other, LegacyName(spec(other, "us-east-1", endpoint)), LegacyName(spec(other, "us-east-1", "https://x"))} {
			if n == legacy {
				t.Fatalf("derived name %q equals the bucket name or legacy name %q", n, legacy)
			}
		}
	})
}

// TestStoreIsPure: an endpoint that is not a URL still has a stable, case-insensitive store.
func TestStoreIsPure(t *testing.T) {
	for _, e := range []string{"https://", "https://%zz", "http://a b", "https:///path"} {
		if Store(e, "data") != Store(strings.ToUpper(e), "data") {
			t.Errorf("store of %q depends on case", e)
		}
	}
}
