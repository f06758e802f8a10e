package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// copyBinary copies the running binary to dest, executable by everyone and
// writable by no one. It is the first init container of the pre-pull variant
// (manifests/variants/prepull): the image is distroless, without cp or a
// shell, so the binary copies itself into an emptyDir, from which the
// warm-up images' init containers run `nodeready noop`. The copy goes to a
// temporary file first and is renamed into place, so a restarted init
// container never leaves half a binary behind.
func copyBinary(args []string, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "nodeready: usage: nodeready copy-binary PATH")
		return exitConfig
	}
	if err := copySelf(args[0]); err != nil {
		fmt.Fprintf(stderr, "nodeready: copy-binary: %v\n", err)
		return exitFailed
	}
	return exitOK
}

func copySelf(dest string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own binary: %w", err)
	}
	src, err := os.Open(self)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dest), ".nodeready-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return fmt.Errorf("copy %s: %w", self, err)
	}
	if err := tmp.Chmod(0o555); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dest)
}
