package watcher

import (
	"bufio"
	"io"
	"path/filepath"
	"strconv"
	"strings"
)

// NetworkFS tells what file system holds dir and whether it is one where
// inotify misses changes (made by another host, or by the host of a VM or
// container): NFS, 9p, CIFS/SMB, FUSE (Docker Desktop's gRPC FUSE, sshfs),
// virtiofs, VirtualBox shared folders, and cluster file systems. On such a
// file system, set Config.Poll. ok is false when the type is unknown (and on
// systems other than Linux).
func NetworkFS(dir string) (fstype string, ok bool) {
	return networkFS(dir)
}

// remoteMagic are statfs f_type values of file systems whose changes inotify
// does not see in full.
var remoteMagic = map[uint32]string{
	0x6969:     "nfs",
	0x01021997: "9p",
	0xFF534D42: "cifs",
	0xFE534D42: "smb2",
	0x517B:     "smb",
	0x65735546: "fuse", // also virtiofs, which is FUSE underneath
	0x5346414F: "afs",
	0x00C36400: "ceph",
	0x786F4256: "vboxsf",
	0x0BD00BD0: "lustre",
	0x01161970: "gfs2",
	0x47504653: "gpfs",
}

// remoteTypes are mount types (as /proc/self/mountinfo names them) of the
// same file systems, and of some whose magic says nothing.
var remoteTypes = []string{
	"nfs", "nfs4", "9p", "cifs", "smb3", "smbfs", "virtiofs", "fakeowner",
	"vboxsf", "afs", "ceph", "lustre", "gfs2", "gpfs", "glusterfs", "prl_fs", "vmhgfs",
}

// classify names a file system from its statfs magic and its mount type
// (either may be unknown: 0, ""), and says whether it is remote.
func classify(magic uint32, mountType string) (string, bool) {
	name, remote := remoteMagic[magic]
	if mountType != "" {
		name = mountType
	}
	if name == "" {
		return "0x" + strconv.FormatUint(uint64(magic), 16), false
	}
	for _, t := range remoteTypes {
		if name == t {
			return name, true
		}
	}
	return name, remote || strings.HasPrefix(name, "fuse")
}

// mountType finds the type of the mount that holds dir (an absolute path
// without symlinks) in a mountinfo table: the mount with the longest mount
// point that contains dir.
func mountType(mountinfo io.Reader, dir string) string {
	best, bestLen := "", -1
	sc := bufio.NewScanner(mountinfo)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		// 36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(tail) < 1 {
			continue
		}
		mnt := unescapeMount(fields[4])
		if mnt != dir && mnt != "/" && !strings.HasPrefix(dir, mnt+string(filepath.Separator)) {
			continue
		}
		if len(mnt) >= bestLen { // later mounts hide earlier ones at the same point
			best, bestLen = tail[0], len(mnt)
		}
	}
	return best
}

// unescapeMount undoes mountinfo's octal escapes (\040 is a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
