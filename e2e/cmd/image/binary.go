package main

import (
	"bytes"
	"debug/elf"
	"fmt"
)

// machines are the ELF machines of the architectures the agent image is released for.
var machines = map[string]elf.Machine{
	"amd64": elf.EM_X86_64,
	"arm64": elf.EM_AARCH64,
}

// checkBinary refuses what would make an image that cannot start: a binary that is not a
// Linux ELF executable for arch, or one that needs a dynamic loader, which the distroless
// static layout does not have (a build without CGO_ENABLED=0).
func checkBinary(bin []byte, arch string) error {
	want, ok := machines[arch]
	if !ok {
		return fmt.Errorf("architecture %q is not one the agent is released for (amd64, arm64)", arch)
	}
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return fmt.Errorf("not an ELF executable: %w", err)
	}
	defer f.Close()
	if f.Machine != want {
		return fmt.Errorf("built for %s, not %s", f.Machine, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("dynamically linked (build with CGO_ENABLED=0)")
		}
	}
	return nil
}
