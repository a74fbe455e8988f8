//go:build !unix

package fleet

func diskFree(string) (uint64, bool) { return 0, false }
