package judge

import (
	"strings"

	"github.com/celld/celld-operator/api/v1alpha1"
)

// Spelling is one way a fleet may name the store a bucket lives in, and the store it means: the
// ground truth the random sequences draw from, known by construction, never computed by the
// operator's code. "{bucket}" stands for the bucket's name (virtual-host and path styles).
type Spelling struct {
	Endpoint, Store string
}

// Spellings are the endpoints the random sequences give fleets: several spellings of Amazon's
// one global namespace, and of one other store.
var Spellings = []Spelling{
	{"", "amazon"},
	{"https://s3.amazonaws.com", "amazon"},
	{"HTTPS://S3.AmazonAWS.com:443/", "amazon"},
	{"http://s3.us-east-1.amazonaws.com.:80//", "amazon"},
	{"https://s3.eu-west-1.amazonaws.com", "amazon"},
	{"https://{bucket}.s3.amazonaws.com", "amazon"},
	{"https://s3.amazonaws.com/{bucket}", "amazon"},
	{"https://minio.example.com:9000", "minio"},
	{"HTTPS://MINIO.EXAMPLE.COM/", "minio"},
	{"http://minio.example.com.:9000//", "minio"},
}

// BucketKey is the bucket a spec names, as the judge knows it: the store its endpoint spelling
// stands for, and the name. An endpoint outside Spellings is its own store.
func BucketKey(b v1alpha1.BucketSpec) string {
	for _, s := range Spellings {
		if strings.ReplaceAll(s.Endpoint, "{bucket}", b.Name) == b.Endpoint {
			return s.Store + "/" + b.Name
		}
	}
	return "endpoint " + b.Endpoint + "/" + b.Name
}
