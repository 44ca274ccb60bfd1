package celldstore

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// Durability modes, as the operator sets CELLD_DURABILITY.
const (
	DurabilityFleet  = "fleet"
	DurabilityBucket = "bucket"
)

// Config is one member's settings.
type Config struct {
	Durability string
	Fleet      string
	FleetUID   string
	Member     string
	// DataDir holds the keys: the durable copy in fleet durability, the working copy in bucket
	// durability. /tmp is not used: the operator bounds it for temporary files, not data.
	DataDir    string
	ClientAddr string
	PeerAddr   string
	Discover   Discover
	Bucket     BucketConfig
	// Interval paces discovery, liveness and catching up.
	Interval time.Duration
	Log      zerolog.Logger

	clientListener net.Listener
	peerListener   net.Listener
	// statfs reads the data folder's filesystem (syscall.Statfs when nil): tests fill a disk
	// without one.
	statfs func(path string, s *syscall.Statfs_t) error
	// beforePull lets a test hold a member in catching up.
	beforePull func(ctx context.Context) error
}

// BucketConfig is where bucket durability keeps the durable copy.
type BucketConfig struct {
	Name     string
	Region   string
	Endpoint string
}

// FromEnv reads the environment the operator renders for a member.
func FromEnv(getenv func(string) string) (Config, error) {
	or := func(k, def string) string {
		if v := getenv(k); v != "" {
			return v
		}
		return def
	}
	c := Config{
		Durability: or("CELLD_DURABILITY", DurabilityFleet),
		Fleet:      getenv("CELLD_FLEET_NAME"),
		FleetUID:   getenv("CELLD_FLEET_UID"),
		Member:     getenv("CELLD_MEMBER_NAME"),
		DataDir:    or("CELLD_DATA_DIR", "/var/lib/celld"),
		Bucket: BucketConfig{
			Name:     getenv("CELLD_BUCKET_NAME"),
			Region:   getenv("CELLD_BUCKET_REGION"),
			Endpoint: getenv("CELLD_BUCKET_ENDPOINT"),
		},
	}
	if c.Member == "" {
		h, err := os.Hostname()
		if err != nil {
			return c, fmt.Errorf("CELLD_MEMBER_NAME is not set and the host has no name: %w", err)
		}
		c.Member = h
	}
	client, err := port(or("CELLD_CLIENT_PORT", "7000"))
	if err != nil {
		return c, fmt.Errorf("CELLD_CLIENT_PORT: %w", err)
	}
	peer, err := port(or("CELLD_PEER_PORT", "7001"))
	if err != nil {
		return c, fmt.Errorf("CELLD_PEER_PORT: %w", err)
	}
	c.ClientAddr, c.PeerAddr = ":"+strconv.Itoa(client), ":"+strconv.Itoa(peer)
	c.Interval, err = time.ParseDuration(or("CELLD_SYNC_INTERVAL", "1s"))
	if err != nil || c.Interval <= 0 {
		return c, fmt.Errorf("CELLD_SYNC_INTERVAL: want a positive duration, got %q", getenv("CELLD_SYNC_INTERVAL"))
	}
	switch c.Durability {
	case DurabilityFleet:
		if peers := getenv("CELLD_PEERS"); peers != "" {
			c.Discover = StaticPeers(peers)
		} else if domain := getenv("CELLD_PEER_DOMAIN"); domain != "" {
			c.Discover = DNSPeers(net.DefaultResolver, domain, peer)
		} else {
			return c, fmt.Errorf("fleet durability needs CELLD_PEER_DOMAIN (or CELLD_PEERS)")
		}
	case DurabilityBucket:
		if c.Bucket.Name == "" || c.Bucket.Endpoint == "" {
			return c, fmt.Errorf("bucket durability needs CELLD_BUCKET_NAME and CELLD_BUCKET_ENDPOINT: this stand-in reaches only a celld-bucket store")
		}
	default:
		return c, fmt.Errorf("CELLD_DURABILITY: want %q or %q, got %q", DurabilityFleet, DurabilityBucket, c.Durability)
	}
	return c, nil
}

func port(s string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("want a port number, got %q", s)
	}
	return p, nil
}
