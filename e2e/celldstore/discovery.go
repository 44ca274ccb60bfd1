package celldstore

import (
	"context"
	"errors"
	"net"
	"sort"
	"strconv"
	"strings"
)

// Discover returns the peer addresses (host:port) of the fleet, this member's own included:
// members tell who is who by asking.
type Discover func(ctx context.Context) ([]string, error)

// StaticPeers is a fixed list, "host:port,host:port".
func StaticPeers(list string) Discover {
	var addrs []string
	for _, a := range strings.Split(list, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	return func(context.Context) ([]string, error) { return addrs, nil }
}

// DNSPeers looks up the peer Service. Its SRV records (port "peer") name every member, not-ready
// ones included, by its own DNS name, which stays the member's across restarts; the A records
// are the fallback for a resolver that serves no SRV.
func DNSPeers(r *net.Resolver, domain string, port int) Discover {
	return func(ctx context.Context) ([]string, error) {
		_, srvs, err := r.LookupSRV(ctx, "peer", "tcp", domain)
		if err == nil && len(srvs) > 0 {
			addrs := make([]string, 0, len(srvs))
			for _, s := range srvs {
				addrs = append(addrs, net.JoinHostPort(strings.TrimSuffix(s.Target, "."), strconv.Itoa(int(s.Port))))
			}
			sort.Strings(addrs)
			return addrs, nil
		}
		hosts, herr := r.LookupHost(ctx, domain)
		if herr != nil {
			return nil, errors.Join(err, herr)
		}
		addrs := make([]string, 0, len(hosts))
		for _, h := range hosts {
			addrs = append(addrs, net.JoinHostPort(h, strconv.Itoa(port)))
		}
		sort.Strings(addrs)
		return addrs, nil
	}
}
