// Command celld is a stand-in for the celld daemon: a small replicated key/value store that
// keeps the promise the operator relies on, so that what the operator does to members can be
// judged on real processes and real disks (with celld-load's checker).
//
// The promise: every acknowledged write is stored durably (fsync'd) on two members, so the fleet
// survives the loss of any one member and not of two at once. A member reports ready only once it
// has caught up after starting (copied from the live members every key it owns) and every key it
// holds is on two live members, asked when the probe comes. An operator that waits for readiness
// between steps loses nothing; one that takes two members at once does.
//
// It reads the environment the operator renders: CELLD_DURABILITY (fleet or bucket),
// CELLD_FLEET_NAME, CELLD_FLEET_UID, CELLD_MEMBER_NAME, CELLD_PEER_DOMAIN (members are found by
// its SRV records for the port named "peer", else its A records), CELLD_CLIENT_PORT,
// CELLD_PEER_PORT, CELLD_BUCKET_NAME, CELLD_BUCKET_REGION, CELLD_BUCKET_ENDPOINT; and, for tests,
// CELLD_PEERS (every member's peer address, this one's included, instead of DNS), CELLD_DATA_DIR
// (/var/lib/celld) and CELLD_SYNC_INTERVAL (1s). Client API on the client port:
//
//	PUT /v1/keys/{key}   204 once durable on two members (bucket: once in the bucket), else 503
//	GET /v1/keys/{key}   the value from this member's store, 404 if it holds none
//	GET /v1/keys         {"member": name, "keys": {key: sha256 of value}}, this member's keys
//	GET /readyz          200 when ready, else 503 and why
//	GET /healthz         200 while the process serves
//	GET /v1/disk         {"path", "totalBytes", "freeBytes", "availableBytes"}: statfs of the data
//	                     folder, the disk as the member sees it
//
// A member whose data disk has less than two values' room (2 MiB) available is not ready, and
// says so: it could not store what it owns. It is ready again once the disk has room (grown
// online, say), without a restart.
//
// What it simplifies, compared with a real replicated store:
//   - Placement is rendezvous hashing over the members that answer right now; there are no
//     partitions, no ranges, no leader and no consensus. Views of who is live may differ for a
//     moment; a write whose two owners cannot both store it is refused, not retried elsewhere.
//   - A write needs two live members: a fleet of one acknowledges nothing.
//   - A key has no version: writing it again overwrites it where the write lands, and copies made
//     earlier elsewhere are not updated. The load writes every key once.
//   - Nothing is ever deleted, and surplus copies left by membership changes are kept.
//   - Members learn each other's keys by listing them (incrementally) every interval, and copy
//     what they own and lack; every value is a whole file, read into memory to copy.
//   - Leaving members hand nothing over: SIGTERM stops at once, like a crash.
//   - Bucket durability writes to a celld-bucket store over plain HTTP (no S3 protocol, no
//     credentials; the region is only logged). The bucket is the durable copy: a write is
//     acknowledged once the bucket has stored it, each member keeps a working copy of every key
//     on its data volume (the Bucket profile's emptyDir), rebuilt from the bucket at start, and
//     is ready once it has caught up with the bucket and reached it recently. The first member claims the bucket for its fleet UID;
//     members of another fleet refuse to serve from it.
//   - A disk first used by one fleet UID is refused by another, and a member alone in discovery
//     counts one copy as enough, having nowhere to put a second.
//   - No authentication, no TLS, no compaction, no limits beyond 1 MiB per value.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/celld/celld-operator/e2e/celldstore"
)

func main() {
	cfg, err := celldstore.FromEnv(os.Getenv)
	log := zerolog.New(os.Stderr).With().Timestamp().Str("member", cfg.Member).Str("fleet", cfg.Fleet).Logger()
	if err != nil {
		log.Error().Err(err).Msg("configuration")
		os.Exit(2)
	}
	cfg.Log = log
	log.Info().Str("durability", cfg.Durability).Str("bucket", cfg.Bucket.Name).Str("region", cfg.Bucket.Region).
		Str("build", os.Getenv("CELLD_BUILD")).Msg("starting")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	n, err := celldstore.Start(cfg)
	if err != nil {
		log.Error().Err(err).Msg("starting")
		fmt.Fprintln(os.Stderr, "celld:", err)
		os.Exit(1)
	}
	<-ctx.Done()
	log.Info().Msg("stopping, handing nothing over")
	n.Stop()
}
