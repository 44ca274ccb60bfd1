package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/rs/zerolog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestCapacityRoundsUpToTheFilesystemsMinimum(t *testing.T) {
	for _, c := range []struct {
		fs             string
		required, want int64
		code           codes.Code
		limit          int64
	}{
		{fs: "xfs", required: 64 * mib, want: minXFS},
		{fs: "xfs", required: 512*mib + 1, want: 513 * mib},
		{fs: "ext4", required: 64 * mib, want: 64 * mib},
		{fs: "ext4", required: 0, want: minExt4},
		{fs: "xfs", required: 64 * mib, limit: 128 * mib, code: codes.OutOfRange},
	} {
		got, err := capacity(&csi.CapacityRange{RequiredBytes: c.required, LimitBytes: c.limit}, c.fs)
		if status.Code(err) != c.code || (err == nil && got != c.want) {
			t.Errorf("capacity(%d, limit %d, %s) = %d, %v; want %d, %v", c.required, c.limit, c.fs, got, err, c.want, c.code)
		}
	}
}

func TestPickNodeTakesTheSchedulersChoice(t *testing.T) {
	req := &csi.TopologyRequirement{
		Requisite: []*csi.Topology{{Segments: map[string]string{TopologyKey: "b"}}},
		Preferred: []*csi.Topology{{Segments: map[string]string{TopologyKey: "a"}}},
	}
	if n, err := pickNode(req); err != nil || n != "a" {
		t.Errorf("pickNode = %q, %v; want the preferred a", n, err)
	}
	if _, err := pickNode(nil); status.Code(err) != codes.InvalidArgument {
		t.Errorf("no topology: %v, want InvalidArgument", err)
	}
}

// TestVolumeGrowsWhileMounted runs a volume's life through the driver's own calls, as the
// sidecars and the kubelet make them: created, staged, published, written, enlarged and grown
// while mounted, then torn down. It needs root, loop devices and xfsprogs.
func TestVolumeGrowsWhileMounted(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: loop devices and mounts")
	}
	for _, tool := range []string{"losetup", "mkfs.xfs", "xfs_growfs", "blkid"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	ctx := context.Background()
	dir := t.TempDir()
	c := &controller{dir: filepath.Join(dir, "volumes"), log: zerolog.Nop()}
	n := &node{id: "n1", dir: c.dir, defaultFS: "xfs", log: zerolog.Nop()}
	capability := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "xfs"}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	created, err := c.CreateVolume(ctx, &csi.CreateVolumeRequest{
		Name: "pvc-1", CapacityRange: &csi.CapacityRange{RequiredBytes: 512 * mib},
		VolumeCapabilities:        []*csi.VolumeCapability{capability},
		AccessibilityRequirements: &csi.TopologyRequirement{Preferred: []*csi.Topology{{Segments: map[string]string{TopologyKey: "n1"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	id := created.GetVolume().GetVolumeId()
	stage, target := filepath.Join(dir, "stage"), filepath.Join(dir, "pod", "mount")
	if _, err := n.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: stage, VolumeCapability: capability}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = n.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target})
		_, _ = n.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: stage})
	})
	if _, err := n.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: stage, TargetPath: target, VolumeCapability: capability}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(target, "kept"), []byte("v"), 0o600); err != nil {
		t.Fatal(err)
	}
	total := func() int64 {
		var s syscall.Statfs_t
		if err := syscall.Statfs(target, &s); err != nil {
			t.Fatal(err)
		}
		return int64(s.Blocks) * int64(s.Bsize)
	}
	small := total()
	if _, err := c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("DeleteVolume of an attached volume: %v, want FailedPrecondition", err)
	}
	grown, err := c.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: 1024 * mib}})
	if err != nil || !grown.GetNodeExpansionRequired() || grown.GetCapacityBytes() != 1024*mib {
		t.Fatalf("ControllerExpandVolume = %v, %v", grown, err)
	}
	if _, err := n.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: id, VolumePath: target, StagingTargetPath: stage,
		CapacityRange: &csi.CapacityRange{RequiredBytes: 1024 * mib}}); err != nil {
		t.Fatal(err)
	}
	big := total()
	if big < 2*small-64*mib {
		t.Errorf("the mounted filesystem went from %d to %d bytes, want about twice", small, big)
	}
	if b, err := os.ReadFile(filepath.Join(target, "kept")); err != nil || string(b) != "v" {
		t.Errorf("the file written before the growth: %q, %v", b, err)
	}
	stats, err := n.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: target})
	if err != nil || stats.GetUsage()[0].GetTotal() != big {
		t.Errorf("NodeGetVolumeStats = %v, %v; want %d bytes in all", stats, err, big)
	}
	if _, err := n.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: stage}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(volumeFile(c.dir, "n1", id)); !os.IsNotExist(err) {
		t.Errorf("the deleted volume's file: %v", err)
	}
}

// An ext4 volume enlarged while unstaged grows when it is staged again: the path of a filesystem
// that grows only once its member starts again.
func TestExt4GrowsWhenStagedAgain(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: loop devices and mounts")
	}
	for _, tool := range []string{"losetup", "mkfs.ext4", "e2fsck", "resize2fs", "blkid"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	ctx := context.Background()
	dir := t.TempDir()
	c := &controller{dir: filepath.Join(dir, "volumes"), log: zerolog.Nop()}
	n := &node{id: "n1", dir: c.dir, defaultFS: "xfs", log: zerolog.Nop()}
	capability := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4"}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	created, err := c.CreateVolume(ctx, &csi.CreateVolumeRequest{
		Name: "pvc-2", CapacityRange: &csi.CapacityRange{RequiredBytes: 64 * mib},
		VolumeCapabilities:        []*csi.VolumeCapability{capability},
		AccessibilityRequirements: &csi.TopologyRequirement{Preferred: []*csi.Topology{{Segments: map[string]string{TopologyKey: "n1"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	id, stage := created.GetVolume().GetVolumeId(), filepath.Join(dir, "stage")
	stageTotal := func() int64 {
		if _, err := n.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: stage, VolumeCapability: capability}); err != nil {
			t.Fatal(err)
		}
		var s syscall.Statfs_t
		if err := syscall.Statfs(stage, &s); err != nil {
			t.Fatal(err)
		}
		if _, err := n.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: stage}); err != nil {
			t.Fatal(err)
		}
		return int64(s.Blocks) * int64(s.Bsize)
	}
	small := stageTotal()
	if _, err := c.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: 256 * mib}}); err != nil {
		t.Fatal(err)
	}
	if big := stageTotal(); big < 3*small {
		t.Errorf("staged again after the volume grew 64Mi -> 256Mi: %d bytes, then %d", small, big)
	}
	// Staged, in no Pod yet, as the kubelet calls it while mounting a volume whose growth is
	// pending: it grows, unmounted if it must, and is mounted again.
	if _, err := c.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: 512 * mib}}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: stage, VolumeCapability: capability}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: id, VolumePath: stage, StagingTargetPath: stage,
		CapacityRange: &csi.CapacityRange{RequiredBytes: 512 * mib}}); err != nil {
		t.Fatal(err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(stage, &st); err != nil || int64(st.Blocks)*int64(st.Bsize) < 400*mib {
		t.Errorf("grown while staged to 512Mi: %d bytes, %v", int64(st.Blocks)*int64(st.Bsize), err)
	}
	if _, err := n.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: stage}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
		t.Fatal(err)
	}
}
