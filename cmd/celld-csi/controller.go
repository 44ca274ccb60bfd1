package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/rs/zerolog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const (
	mib = int64(1) << 20
	// minXFS is the smallest xfs volume: mkfs.xfs refuses a filesystem under 300MB.
	minXFS = 320 * mib
	// minExt4 leaves room for the journal.
	minExt4 = 16 * mib
)

// validID keeps a volume's name a plain file name: it becomes a path under the volumes folder.
var validID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

type controller struct {
	csi.UnimplementedControllerServer
	dir string
	log zerolog.Logger
	mu  sync.Mutex
}

func (c *controller) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	rpc := func(t csi.ControllerServiceCapability_RPC_Type) *csi.ControllerServiceCapability {
		return &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}}}
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: []*csi.ControllerServiceCapability{
		rpc(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME),
		rpc(csi.ControllerServiceCapability_RPC_EXPAND_VOLUME),
	}}, nil
}

// volumeFile is where a node's volume lives.
func volumeFile(dir, node, id string) string { return filepath.Join(dir, node, id+".img") }

// findVolume finds a volume's file in whichever node's folder holds it.
func findVolume(dir, id string) (string, error) {
	if !validID.MatchString(id) {
		return "", status.Errorf(codes.InvalidArgument, "volume id %q is not a plain name", id)
	}
	matches, err := filepath.Glob(filepath.Join(dir, "*", id+".img"))
	if err != nil || len(matches) == 0 {
		return "", status.Errorf(codes.NotFound, "volume %s: no file under %s", id, dir)
	}
	return matches[0], nil
}

// pickNode is the node the volume must live on: the scheduler's choice, first in the preferred
// topologies the provisioner passes for WaitForFirstConsumer, else the first requisite one.
func pickNode(req *csi.TopologyRequirement) (string, error) {
	for _, ts := range [][]*csi.Topology{req.GetPreferred(), req.GetRequisite()} {
		for _, t := range ts {
			if n := t.GetSegments()[TopologyKey]; n != "" {
				return n, nil
			}
		}
	}
	return "", status.Errorf(codes.InvalidArgument, "no topology names a node (%s): the StorageClass needs volumeBindingMode WaitForFirstConsumer", TopologyKey)
}

// capacity is what a request gets: at least the filesystem's minimum, whole MiB, within the limit.
func capacity(r *csi.CapacityRange, fsType string) (int64, error) {
	want := max(r.GetRequiredBytes(), mib)
	floor := minXFS
	if fsType == "ext4" {
		floor = minExt4
	}
	want = max(want, floor)
	want = (want + mib - 1) / mib * mib
	if limit := r.GetLimitBytes(); limit > 0 && want > limit {
		return 0, status.Errorf(codes.OutOfRange, "%d bytes are needed (a %s volume is at least %d), the limit is %d", want, fsType, floor, limit)
	}
	return want, nil
}

func fsTypeOf(caps []*csi.VolumeCapability) string {
	for _, c := range caps {
		if fs := c.GetMount().GetFsType(); fs != "" {
			return fs
		}
	}
	return "xfs"
}

func (c *controller) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if !validID.MatchString(req.GetName()) {
		return nil, status.Errorf(codes.InvalidArgument, "volume name %q is not a plain name", req.GetName())
	}
	for _, vc := range req.GetVolumeCapabilities() {
		if vc.GetBlock() != nil {
			return nil, status.Error(codes.InvalidArgument, "block volumes are not served: filesystem volumes only")
		}
		if m := vc.GetAccessMode().GetMode(); m != csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER &&
			m != csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER && m != csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER {
			return nil, status.Errorf(codes.InvalidArgument, "access mode %s: a node-local volume is for one node", m)
		}
	}
	node, err := pickNode(req.GetAccessibilityRequirements())
	if err != nil {
		return nil, err
	}
	if !validID.MatchString(node) {
		return nil, status.Errorf(codes.InvalidArgument, "node %q is not a plain name", node)
	}
	fsType := fsTypeOf(req.GetVolumeCapabilities())
	size, err := capacity(req.GetCapacityRange(), fsType)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	file := volumeFile(c.dir, node, req.GetName())
	// Idempotent: a retried CreateVolume finds the file it made.
	if existing, err := findVolume(c.dir, req.GetName()); err == nil {
		if existing != file {
			return nil, status.Errorf(codes.AlreadyExists, "volume %s exists on another node (%s)", req.GetName(), existing)
		}
		st, err := os.Stat(existing)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "volume %s: %v", req.GetName(), err)
		}
		size = max(size, st.Size())
	} else {
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			return nil, status.Errorf(codes.Internal, "node folder: %v", err)
		}
		if err := makeSparse(file, size); err != nil {
			return nil, status.Errorf(codes.Internal, "volume %s: %v", req.GetName(), err)
		}
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{
		VolumeId:           req.GetName(),
		CapacityBytes:      size,
		AccessibleTopology: []*csi.Topology{{Segments: map[string]string{TopologyKey: node}}},
		VolumeContext:      map[string]string{"node": node},
	}}, nil
}

func makeSparse(file string, size int64) error {
	f, err := os.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		os.Remove(file)
		return err
	}
	return f.Close()
}

func (c *controller) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	file, err := findVolume(c.dir, req.GetVolumeId())
	if status.Code(err) == codes.NotFound {
		return &csi.DeleteVolumeResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	// A volume still attached on its node is in use: the node unstages (and detaches) first.
	if dev, err := loopOf(context.Background(), file); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: %v", req.GetVolumeId(), err)
	} else if dev != "" {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is still attached as %s", req.GetVolumeId(), dev)
	}
	if err := os.Remove(file); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.Internal, "volume %s: %v", req.GetVolumeId(), err)
	}
	return &csi.DeleteVolumeResponse{}, nil
}

// ControllerExpandVolume enlarges the volume's file, as a cloud enlarges a disk; the filesystem
// is the node's to grow. It never shrinks one.
func (c *controller) ControllerExpandVolume(_ context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	file, err := findVolume(c.dir, req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(file)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: %v", req.GetVolumeId(), err)
	}
	size, err := capacity(req.GetCapacityRange(), "ext4")
	if err != nil {
		return nil, err
	}
	if size > st.Size() {
		if err := os.Truncate(file, size); err != nil {
			return nil, status.Errorf(codes.Internal, "enlarge volume %s to %d: %v", req.GetVolumeId(), size, err)
		}
		c.log.Info().Str("volume", req.GetVolumeId()).Int64("from", st.Size()).Int64("to", size).Msg("enlarged")
	}
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: max(size, st.Size()), NodeExpansionRequired: true}, nil
}

func (c *controller) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if _, err := findVolume(c.dir, req.GetVolumeId()); err != nil {
		return nil, err
	}
	for _, vc := range req.GetVolumeCapabilities() {
		if vc.GetBlock() != nil {
			return &csi.ValidateVolumeCapabilitiesResponse{Message: "block volumes are not served"}, nil
		}
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeCapabilities: req.GetVolumeCapabilities()}}, nil
}
