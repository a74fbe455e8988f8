//go:build !unix

package plan

import "os"

// openDirTyped opens the directory dir inside root for ReadDir.
func openDirTyped(root *os.Root, dir string) (*os.File, error) { return root.Open(dir) }
