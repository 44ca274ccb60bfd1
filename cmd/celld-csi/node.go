package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/rs/zerolog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

type node struct {
	csi.UnimplementedNodeServer
	id, dir, defaultFS string
	log                zerolog.Logger
	// mu runs one node operation at a time: a loop device found free must still be free when it
	// is attached, and a mount checked must not be mounted twice.
	mu sync.Mutex
}

func (n *node) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{
		NodeId:             n.id,
		AccessibleTopology: &csi.Topology{Segments: map[string]string{TopologyKey: n.id}},
	}, nil
}

func (n *node) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	rpc := func(t csi.NodeServiceCapability_RPC_Type) *csi.NodeServiceCapability {
		return &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: t}}}
	}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{
		rpc(csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME),
		rpc(csi.NodeServiceCapability_RPC_EXPAND_VOLUME),
		rpc(csi.NodeServiceCapability_RPC_GET_VOLUME_STATS),
	}}, nil
}

// file is the volume's file, which must be in this node's folder: the volume is node-local.
func (n *node) file(id string) (string, error) {
	if !validID.MatchString(id) {
		return "", status.Errorf(codes.InvalidArgument, "volume id %q is not a plain name", id)
	}
	f := volumeFile(n.dir, n.id, id)
	if _, err := os.Stat(f); err != nil {
		return "", status.Errorf(codes.NotFound, "volume %s is not on node %s: %v", id, n.id, err)
	}
	return f, nil
}

// NodeStageVolume attaches the volume (a loop device on its file), makes its filesystem the first
// time, and mounts it at the staging path.
func (n *node) NodeStageVolume(ctx context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	target := req.GetStagingTargetPath()
	if target == "" || req.GetVolumeCapability().GetMount() == nil {
		return nil, status.Error(codes.InvalidArgument, "a staging path and a mount capability are required")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	file, err := n.file(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if mounted, err := isMountPoint(target); err != nil {
		return nil, status.Errorf(codes.Internal, "staging path: %v", err)
	} else if mounted {
		return &csi.NodeStageVolumeResponse{}, nil
	}
	dev, err := attach(ctx, file)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "attach volume %s: %v", req.GetVolumeId(), err)
	}
	fsType := req.GetVolumeCapability().GetMount().GetFsType()
	if fsType == "" {
		fsType = n.defaultFS
	}
	have, err := fsOn(ctx, dev)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: %v", req.GetVolumeId(), err)
	}
	switch {
	case have == "":
		args := []string{"-q", "-F", "-m", "0"} // ext4: no blocks reserved for root, which no member is
		if fsType == "xfs" {
			args = []string{"-q", "-f"}
		}
		if out, err := exec.CommandContext(ctx, "mkfs."+fsType, append(args, dev)...).CombinedOutput(); err != nil {
			return nil, status.Errorf(codes.Internal, "mkfs.%s %s: %v: %s", fsType, dev, err, out)
		}
		n.log.Info().Str("volume", req.GetVolumeId()).Str("device", dev).Str("fs", fsType).Msg("filesystem made")
	case have != fsType:
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s holds %s, %s was asked for", req.GetVolumeId(), have, fsType)
	case have == "ext4":
		// Grown here, unmounted, when the volume grew while its filesystem could not: ext4's
		// online growth needs CAP_SYS_RESOURCE, which this machine withholds, and offline
		// growth needs only the device. This is the driver whose filesystem grows only once its
		// member starts again.
		if err := growExt4Offline(ctx, dev); err != nil {
			return nil, status.Errorf(codes.Internal, "volume %s: %v", req.GetVolumeId(), err)
		}
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "staging path: %v", err)
	}
	if err := syscall.Mount(dev, target, fsType, 0, ""); err != nil {
		return nil, status.Errorf(codes.Internal, "mount %s (%s) on %s: %v", dev, fsType, target, err)
	}
	return &csi.NodeStageVolumeResponse{}, nil
}

func (n *node) NodeUnstageVolume(ctx context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := unmount(req.GetStagingTargetPath()); err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	file, err := n.file(req.GetVolumeId())
	if status.Code(err) == codes.NotFound {
		return &csi.NodeUnstageVolumeResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	if err := detach(ctx, file); err != nil {
		return nil, status.Errorf(codes.Internal, "detach volume %s: %v", req.GetVolumeId(), err)
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}

// NodePublishVolume bind-mounts the staged filesystem into the Pod's volume folder.
func (n *node) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	src, target := req.GetStagingTargetPath(), req.GetTargetPath()
	if src == "" || target == "" {
		return nil, status.Error(codes.InvalidArgument, "staging and target paths are required")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if mounted, err := isMountPoint(target); err != nil {
		return nil, status.Errorf(codes.Internal, "target path: %v", err)
	} else if mounted {
		return &csi.NodePublishVolumeResponse{}, nil
	}
	if staged, err := isMountPoint(src); err != nil || !staged {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not staged at %s (%v)", req.GetVolumeId(), src, err)
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "target path: %v", err)
	}
	if err := syscall.Mount(src, target, "", syscall.MS_BIND, ""); err != nil {
		return nil, status.Errorf(codes.Internal, "bind %s on %s: %v", src, target, err)
	}
	if req.GetReadonly() {
		if err := syscall.Mount("", target, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
			_ = syscall.Unmount(target, 0)
			return nil, status.Errorf(codes.Internal, "read-only %s: %v", target, err)
		}
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

func (n *node) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := unmount(req.GetTargetPath()); err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// NodeExpandVolume makes the loop device see its file's new size and grows the filesystem on it,
// mounted: the Pod using it keeps running.
func (n *node) NodeExpandVolume(ctx context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	file, err := n.file(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(file)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: %v", req.GetVolumeId(), err)
	}
	if want := req.GetCapacityRange().GetRequiredBytes(); st.Size() < want {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is %d bytes, %d asked: the controller has not enlarged it", req.GetVolumeId(), st.Size(), want)
	}
	dev, err := loopOf(ctx, file)
	if err != nil || dev == "" {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not attached on %s (%v)", req.GetVolumeId(), n.id, err)
	}
	if out, err := exec.CommandContext(ctx, "losetup", "-c", dev).CombinedOutput(); err != nil {
		return nil, status.Errorf(codes.Internal, "losetup -c %s: %v: %s", dev, err, out)
	}
	mountPoint := req.GetStagingTargetPath()
	if mountPoint == "" {
		mountPoint = req.GetVolumePath()
	}
	fs, err := fsOn(ctx, dev)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: %v", req.GetVolumeId(), err)
	}
	var grow *exec.Cmd
	switch fs {
	case "xfs":
		grow = exec.CommandContext(ctx, "xfs_growfs", mountPoint)
	case "ext4":
		grow = exec.CommandContext(ctx, "resize2fs", dev)
	default:
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s holds %q, which this driver does not grow", req.GetVolumeId(), fs)
	}
	if out, err := grow.CombinedOutput(); err != nil {
		// ext4 online needs CAP_SYS_RESOURCE. The kubelet also calls this while it mounts a
		// volume whose growth is pending, staged but not yet in any Pod: then the filesystem
		// can be grown unmounted, which is how a member's start grows it.
		// It is staged and published then, but no container has it yet: no mount namespace
		// but this machine's holds it.
		if fs != "ext4" {
			return nil, status.Errorf(codes.Internal, "grow %s on %s: %v: %s", fs, dev, err, strings.TrimSpace(string(out)))
		}
		if users, uerr := containersUsing(dev); uerr != nil || users > 0 {
			return nil, status.Errorf(codes.Internal, "grow ext4 on %s, in use by %d processes' mounts (%v): %v: %s; it grows once its Pod starts again",
				dev, users, uerr, err, strings.TrimSpace(string(out)))
		}
		if err := regrowUnmounted(ctx, dev); err != nil {
			return nil, status.Errorf(codes.Internal, "volume %s: %v", req.GetVolumeId(), err)
		}
	}
	n.log.Info().Str("volume", req.GetVolumeId()).Str("device", dev).Int64("bytes", st.Size()).Msg("filesystem grown")
	return &csi.NodeExpandVolumeResponse{CapacityBytes: st.Size()}, nil
}

func (n *node) NodeGetVolumeStats(_ context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	var s syscall.Statfs_t
	if err := syscall.Statfs(req.GetVolumePath(), &s); err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return nil, status.Errorf(codes.NotFound, "volume path %s: %v", req.GetVolumePath(), err)
		}
		return nil, status.Errorf(codes.Internal, "statfs %s: %v", req.GetVolumePath(), err)
	}
	bs := int64(s.Bsize)
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{Unit: csi.VolumeUsage_BYTES, Total: int64(s.Blocks) * bs, Available: int64(s.Bavail) * bs, Used: int64(s.Blocks-s.Bfree) * bs},
		{Unit: csi.VolumeUsage_INODES, Total: int64(s.Files), Available: int64(s.Ffree), Used: int64(s.Files - s.Ffree)},
	}}, nil
}

// growExt4Offline grows an unmounted ext4 to its device, after the check resize2fs requires;
// a filesystem as large as its device is left as it is.
func growExt4Offline(ctx context.Context, dev string) error {
	out, err := exec.CommandContext(ctx, "e2fsck", "-f", "-p", dev).CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) { // 1: errors corrected
		return fmt.Errorf("e2fsck %s: %w: %s", dev, err, out)
	}
	if out, err := exec.CommandContext(ctx, "resize2fs", dev).CombinedOutput(); err != nil {
		return fmt.Errorf("resize2fs %s: %w: %s", dev, err, out)
	}
	return nil
}

// --- devices and mounts --------------------------------------------------------------------------

// loopOf is the loop device attached to file, or "" when none is.
func loopOf(ctx context.Context, file string) (string, error) {
	out, err := exec.CommandContext(ctx, "losetup", "--noheadings", "--output", "NAME", "--associated", file).Output()
	if err != nil {
		return "", fmt.Errorf("losetup --associated %s: %w", file, err)
	}
	fields := strings.Fields(string(out))
	if len(fields) == 0 {
		return "", nil
	}
	return fields[0], nil
}

func attach(ctx context.Context, file string) (string, error) {
	if dev, err := loopOf(ctx, file); err != nil || dev != "" {
		if err == nil {
			// Attached before the file grew: the device must see its size now.
			if out, err := exec.CommandContext(ctx, "losetup", "-c", dev).CombinedOutput(); err != nil {
				return "", fmt.Errorf("losetup -c %s: %w: %s", dev, err, out)
			}
		}
		return dev, err
	}
	out, err := exec.CommandContext(ctx, "losetup", "--find", "--show", file).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("losetup --find %s: %w: %s", file, err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

func detach(ctx context.Context, file string) error {
	dev, err := loopOf(ctx, file)
	if err != nil || dev == "" {
		return err
	}
	if out, err := exec.CommandContext(ctx, "losetup", "-d", dev).CombinedOutput(); err != nil {
		return fmt.Errorf("losetup -d %s: %w: %s", dev, err, out)
	}
	return nil
}

// fsOn is the filesystem on dev, or "" when it holds none.
func fsOn(ctx context.Context, dev string) (string, error) {
	out, err := exec.CommandContext(ctx, "blkid", "-p", "-s", "TYPE", "-o", "value", dev).Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 2 {
		return "", nil // blkid: nothing found
	}
	if err != nil {
		return "", fmt.Errorf("blkid %s: %w", dev, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// isMountPoint tells whether path is mounted on, from this process's mount table.
func isMountPoint(path string) (bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && unescapeMount(fields[4]) == path {
			return true, nil
		}
	}
	return false, sc.Err()
}

// containersUsing counts the processes in another mount namespace than this one's that have dev
// mounted: a container holding the volume.
func containersUsing(dev string) (int, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(dev, &st); err != nil {
		return 0, fmt.Errorf("stat %s: %w", dev, err)
	}
	id := fmt.Sprintf("%d:%d", (st.Rdev>>8)&0xfff, (st.Rdev&0xff)|((st.Rdev>>12)&0xfff00))
	self, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return 0, err
	}
	procs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return 0, err
	}
	seen := map[string]bool{self: true}
	users := 0
	for _, p := range procs {
		ns, err := os.Readlink(p + "/ns/mnt")
		if err != nil || seen[ns] {
			continue
		}
		seen[ns] = true
		b, err := os.ReadFile(p + "/mountinfo")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 2 && f[2] == id {
				users++
				break
			}
		}
	}
	return users, nil
}

// regrowUnmounted unmounts every mount of dev on this machine (its staging path, a Pod's bind
// mount not yet in a container), grows it, and mounts it where it was, the staging path first.
func regrowUnmounted(ctx context.Context, dev string) error {
	points, err := mountsOf(dev)
	if err != nil || len(points) == 0 {
		return fmt.Errorf("mounts of %s: %v (%d)", dev, err, len(points))
	}
	for i := len(points) - 1; i >= 0; i-- {
		if err := syscall.Unmount(points[i], 0); err != nil {
			return fmt.Errorf("unmount %s to grow it: %w", points[i], err)
		}
	}
	gerr := growExt4Offline(ctx, dev)
	if err := syscall.Mount(dev, points[0], "ext4", 0, ""); err != nil {
		return fmt.Errorf("mount %s on %s again: %w (growing: %v)", dev, points[0], err, gerr)
	}
	for _, p := range points[1:] {
		if err := syscall.Mount(points[0], p, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s on %s again: %w", points[0], p, err)
		}
	}
	return gerr
}

// mountsOf lists the mount points of device dev: its staging path, and each Pod's bind mount.
func mountsOf(dev string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// The mount source follows the " - " separator: fstype, then source.
		line := sc.Text()
		fields := strings.Fields(line)
		_, tail, ok := strings.Cut(line, " - ")
		if rest := strings.Fields(tail); ok && len(rest) >= 2 && unescapeMount(rest[1]) == dev && len(fields) > 4 {
			out = append(out, unescapeMount(fields[4]))
		}
	}
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes of space, tab, newline and backslash.
func unescapeMount(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

// unmount unmounts path when mounted and removes it; a path already gone is done.
func unmount(path string) error {
	if path == "" {
		return errors.New("no path given")
	}
	mounted, err := isMountPoint(path)
	if err != nil {
		return fmt.Errorf("mount table: %w", err)
	}
	if mounted {
		if err := syscall.Unmount(path, 0); err != nil {
			return fmt.Errorf("unmount %s: %w", path, err)
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}
