// Package reservation holds what makes a bucket one fleet's, apart from the capacity policy: which
// bucket a fleet's spec.bucket reaches (its canonical identity, and the name of the CelldReservation
// derived from it), which reservation binds a bucket and which fleet has the strongest claim while
// none does, and the bounded capacity history a reservation's status keeps across restarts.
//
// # Identity
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
//
// # Claims
//
// Every fleet ranks the claims to its bucket from its own observation and reaches the same
// answer, so only one of them binds the bucket.
package reservation
