//go:build !linux

package watcher

func networkFS(string) (string, bool) { return "", false }
