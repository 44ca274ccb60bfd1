// Command celld-csi is a stand-in for the user's CSI driver, as cmd/celld stands in for celld: a
// small driver behind the same CSI calls a real one answers, so that a PersistentFleet's disks can
// be provisioned, mounted, and grown online on the real nodes through Kubernetes' own CSI path
// (external-provisioner, external-resizer, the kubelet's CSI volume plugin).
//
// A volume is a sparse file on this machine, the node's "disk"; attaching it is a loop device;
// the filesystem on it is made at the first stage (xfs by default, ext4 on request). It runs in
// two modes:
//
//	celld-csi -mode controller -endpoint unix:///run/x/controller.sock -volumes-dir DIR
//	celld-csi -mode node -endpoint unix:///run/x/n1.sock -node-id real-node-1 -volumes-dir DIR \
//	    -registration-dir KUBELET_ROOT/plugins_registry
//
// The controller answers Identity and Controller (CreateVolume, DeleteVolume,
// ControllerExpandVolume) for the sidecars; each node's plugin answers Identity and Node for its
// kubelet, and registers itself with that kubelet through the plugin-registration socket, which a
// real deployment leaves to node-driver-registrar.
//
// What it simplifies, compared with a real driver:
//   - The "cloud" is one folder on this machine that the controller and every node plugin see:
//     DIR/<node>/<volume>.img. CreateVolume makes the file in the folder of the node the scheduler
//     picked (the volume is node-local: topology key topology.celld.io/node), ControllerExpandVolume
//     enlarges the file, as a cloud API enlarges a disk, and the node plugin makes its loop device
//     see the new size (losetup -c, as a rescan would) and grows the filesystem online.
//   - Nothing is authenticated; there are no snapshots, clones, block volumes, quotas, or
//     attach/detach (the CSIDriver says attachRequired: false); one node operation runs at a time.
//   - xfs refuses filesystems under 300MB, so an xfs volume is never smaller than minXFS: a request
//     below it gets that (a driver may give more than asked, as cloud disks round up).
//   - ext4 grows online only with CAP_SYS_RESOURCE (EXT4_IOC_RESIZE_FS), which this machine does
//     not grant: an ext4 volume's NodeExpandVolume fails saying so, and its filesystem grows when
//     the volume is staged again (e2fsck, then resize2fs, unmounted), as a driver whose
//     filesystem grows only once its member restarts; xfs_growfs needs only CAP_SYS_ADMIN.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// TopologyKey pins a volume to the node whose folder holds its file.
const TopologyKey = "topology.celld.io/node"

type config struct {
	mode, name, endpoint, volumesDir, nodeID, registrationDir, defaultFS string
}

func main() {
	var cfg config
	flag.StringVar(&cfg.mode, "mode", "", "controller or node")
	flag.StringVar(&cfg.name, "driver-name", "csi.celld.io", "the CSI driver's name (the StorageClass's provisioner)")
	flag.StringVar(&cfg.endpoint, "endpoint", "", "the CSI endpoint to serve, unix:///path")
	flag.StringVar(&cfg.volumesDir, "volumes-dir", "", "the folder holding every node's volume files")
	flag.StringVar(&cfg.nodeID, "node-id", "", "node mode: the node's name")
	flag.StringVar(&cfg.registrationDir, "registration-dir", "", "node mode: the kubelet's plugins_registry folder")
	flag.StringVar(&cfg.defaultFS, "default-fstype", "xfs", "the filesystem made when the volume capability names none")
	flag.Parse()
	log := zerolog.New(os.Stderr).With().Timestamp().Str("mode", cfg.mode).Str("node", cfg.nodeID).Logger()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Error().Err(err).Msg("exiting")
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config, log zerolog.Logger) error {
	if cfg.endpoint == "" || cfg.volumesDir == "" {
		return errors.New("-endpoint and -volumes-dir are required")
	}
	sock, err := socketPath(cfg.endpoint)
	if err != nil {
		return err
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(logCalls(log)))
	id := &identity{name: cfg.name, controller: cfg.mode == "controller"}
	csi.RegisterIdentityServer(srv, id)
	switch cfg.mode {
	case "controller":
		csi.RegisterControllerServer(srv, &controller{dir: cfg.volumesDir, log: log})
	case "node":
		if cfg.nodeID == "" || cfg.registrationDir == "" {
			return errors.New("node mode: -node-id and -registration-dir are required")
		}
		csi.RegisterNodeServer(srv, &node{id: cfg.nodeID, dir: cfg.volumesDir, defaultFS: cfg.defaultFS, log: log})
	default:
		return fmt.Errorf("-mode %q: want controller or node", cfg.mode)
	}
	ln, err := listenUnix(sock)
	if err != nil {
		return err
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()
	log.Info().Str("endpoint", sock).Str("volumes", cfg.volumesDir).Msg("serving")
	// Registered only once the CSI socket listens: the kubelet calls NodeGetInfo as soon as it
	// has read the registration.
	if cfg.mode == "node" {
		reg := grpc.NewServer()
		registerapi.RegisterRegistrationServer(reg, &registration{name: cfg.name, endpoint: sock, log: log})
		regSock := filepath.Join(cfg.registrationDir, cfg.name+"-reg.sock")
		rln, err := listenUnix(regSock)
		if err != nil {
			return err
		}
		go func() { _ = reg.Serve(rln) }()
		defer reg.Stop()
		log.Info().Str("socket", regSock).Msg("registering with the kubelet")
	}
	<-ctx.Done()
	return nil
}

func socketPath(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "unix" || u.Path == "" {
		return "", fmt.Errorf("endpoint %q: want unix:///path", endpoint)
	}
	return u.Path, nil
}

// listenUnix listens on a socket path, replacing a socket a previous run left behind.
func listenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("socket folder: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("stale socket %s: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return ln, nil
}

func logCalls(log zerolog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		method := info.FullMethod[strings.LastIndex(info.FullMethod, "/")+1:]
		switch {
		case err != nil:
			log.Warn().Str("call", method).Err(err).Msg("failed")
		case method != "Probe" && method != "NodeGetVolumeStats" && method != "NodeGetCapabilities":
			log.Info().Str("call", method).Interface("request", req).Msg("done")
		}
		return resp, err
	}
}

type identity struct {
	csi.UnimplementedIdentityServer
	name       string
	controller bool
}

func (i *identity) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: i.name, VendorVersion: "v0.0.0-standin"}, nil
}

func (i *identity) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	service := func(t csi.PluginCapability_Service_Type) *csi.PluginCapability {
		return &csi.PluginCapability{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: t}}}
	}
	caps := []*csi.PluginCapability{
		service(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS),
		{Type: &csi.PluginCapability_VolumeExpansion_{VolumeExpansion: &csi.PluginCapability_VolumeExpansion{
			Type: csi.PluginCapability_VolumeExpansion_ONLINE}}},
	}
	if i.controller {
		caps = append(caps, service(csi.PluginCapability_Service_CONTROLLER_SERVICE))
	}
	return &csi.GetPluginCapabilitiesResponse{Capabilities: caps}, nil
}

func (i *identity) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

// registration answers the kubelet's plugin watcher, as node-driver-registrar would.
type registration struct {
	registerapi.UnimplementedRegistrationServer
	name, endpoint string
	log            zerolog.Logger
}

func (r *registration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: r.name, Endpoint: r.endpoint, SupportedVersions: []string{"1.0.0"}}, nil
}

func (r *registration) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if s.PluginRegistered {
		r.log.Info().Msg("registered with the kubelet")
	} else {
		r.log.Error().Str("error", s.Error).Msg("the kubelet refused the registration")
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}
