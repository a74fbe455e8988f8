//go:build !unix

package watcher

import "io/fs"

func inode(fs.FileInfo) uint64 { return 0 }
