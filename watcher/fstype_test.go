package watcher

import (
	"slices"
	"strings"
	"testing"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		magic     uint32
		mountType string
		name      string
		remote    bool
	}{
		{0xEF53, "ext4", "ext4", false},
		{0x01021994, "tmpfs", "tmpfs", false},
		{0x794C7630, "overlay", "overlay", false},
		{0x6969, "nfs4", "nfs4", true},
		{0x6969, "", "nfs", true},
		{0x01021997, "9p", "9p", true},
		{0xFF534D42, "cifs", "cifs", true},
		{0xFE534D42, "smb3", "smb3", true},
		{0x65735546, "fuse.grpcfuse", "fuse.grpcfuse", true}, // Docker Desktop
		{0x65735546, "virtiofs", "virtiofs", true},
		{0x65735546, "", "fuse", true},
		{0, "fakeowner", "fakeowner", true}, // Docker Desktop's shim
		{0x786F4256, "", "vboxsf", true},
		{0x12345678, "", "0x12345678", false},
	}
	for _, tt := range tests {
		name, remote := classify(tt.magic, tt.mountType)
		if name != tt.name || remote != tt.remote {
			t.Errorf("classify(%#x, %q) = %q, %v; want %q, %v", tt.magic, tt.mountType, name, remote, tt.name, tt.remote)
		}
	}
}

func TestMountType(t *testing.T) {
	const mountinfo = `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
23 22 0:21 / /dev/shm rw,nosuid shared:2 - tmpfs tmpfs rw
40 22 0:35 / /mnt/work rw,relatime shared:3 - nfs4 server:/export rw,vers=4.2
41 40 0:36 / /mnt/work/local rw shared:4 - ext4 /dev/sdb1 rw
42 22 0:37 / /host\040files rw - fuse.grpcfuse grpcfuse rw
43 22 0:38 / /over rw - ext4 /dev/sdc1 rw
44 22 0:39 / /over rw - virtiofs share rw
bad line
`
	tests := []struct{ dir, want string }{
		{"/", "ext4"},
		{"/home/me", "ext4"},
		{"/dev/shm/x", "tmpfs"},
		{"/mnt/work", "nfs4"},
		{"/mnt/work/project", "nfs4"},
		{"/mnt/work/local/x", "ext4"},
		{"/mnt/workshop", "ext4"},
		{"/host files/ws", "fuse.grpcfuse"},
		{"/over/ws", "virtiofs"}, // the later mount hides the earlier one
	}
	for _, tt := range tests {
		if got := mountType(strings.NewReader(mountinfo), tt.dir); got != tt.want {
			t.Errorf("mountType(%q) = %q, want %q", tt.dir, got, tt.want)
		}
	}
}

func TestNetworkFS(t *testing.T) {
	name, remote := NetworkFS(t.TempDir())
	t.Logf("the temporary directory is on %s (remote: %v)", name, remote)
	if name == "" {
		t.Fatal("no file system type")
	}
	if local := []string{"ext4", "ext3", "xfs", "btrfs", "tmpfs", "overlay", "zfs"}; slices.Contains(local, name) && remote {
		t.Errorf("%s reported as remote", name)
	}
	if _, ok := NetworkFS("/does/not/exist"); ok {
		t.Error("a missing directory reported as remote")
	}
}
