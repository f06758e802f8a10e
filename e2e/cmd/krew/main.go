// Command krew packs the kubectl plugin's release, the one build `make plugin-release` and the
// release workflow share: for each platform, kubectl-nodeready_<version>_<os>_<arch>.tar.gz
// holding the binary (kubectl-nodeready, kubectl-nodeready.exe on Windows) and LICENSE, its
// SHA-256 in a .sha256 file beside it, and the krew manifest nodeready.yaml: the template
// plugins/krew/nodeready.yaml with the version and every archive's SHA-256 filled in.
//
//	go run ./cmd/krew -version v0.1.0 -out ../bin/plugin \
//	    -binary linux/amd64=../bin/linux_amd64/kubectl-nodeready,darwin/arm64=../bin/darwin_arm64/kubectl-nodeready
//
// The binaries are built beforehand (CGO_ENABLED=0 GOOS=... GOARCH=... go build -trimpath);
// `make plugin-release` does both. Archives carry fixed names, owners and times, so the same
// binaries give the same SHA-256 on any machine. A platform the template names and -binary does
// not, or the reverse, is refused: the manifest never names an archive the release lacks.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

func main() { os.Exit(run(os.Args[1:], os.Stderr)) }

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("krew", flag.ContinueOnError)
	fs.SetOutput(stderr)
	version := fs.String("version", "", "the release's version, such as v0.1.0 (required)")
	binaries := fs.String("binary", "", "OS/ARCH=PATH of the plugin's binary, comma-separated for several platforms (required)")
	out := fs.String("out", "", "the directory to write the archives and the manifest into (required)")
	template := fs.String("template", "../plugins/krew/nodeready.yaml", "the krew manifest's template")
	license := fs.String("license", "../LICENSE", "the license put into every archive")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *version == "" || *binaries == "" || *out == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "krew: -version, -binary and -out are required, and nothing else")
		return 2
	}
	bins, err := parseBinaries(*binaries)
	if err == nil {
		err = release(*version, bins, *template, *license, *out)
	}
	if err != nil {
		fmt.Fprintf(stderr, "krew: %v\n", err)
		return 1
	}
	return 0
}

// parseBinaries reads OS/ARCH=PATH,...
func parseBinaries(s string) (map[string]string, error) {
	bins := map[string]string{}
	for entry := range strings.SplitSeq(s, ",") {
		platform, path, ok := strings.Cut(entry, "=")
		if !ok || !strings.Contains(platform, "/") || path == "" {
			return nil, fmt.Errorf("-binary %q: write OS/ARCH=PATH", entry)
		}
		bins[platform] = path
	}
	return bins, nil
}

// placeholder finds the template's per-platform SHA-256 placeholders.
var placeholder = regexp.MustCompile(`\{\{SHA256_([a-z0-9]+)_([a-z0-9]+)\}\}`)

// Platforms lists the platforms the template names, as OS/ARCH.
func Platforms(template string) []string {
	var out []string
	for _, m := range placeholder.FindAllStringSubmatch(template, -1) {
		out = append(out, m[1]+"/"+m[2])
	}
	return out
}

// Archive is the name of a platform's archive.
func Archive(version, platform string) string {
	return fmt.Sprintf("kubectl-nodeready_%s_%s.tar.gz", version, strings.ReplaceAll(platform, "/", "_"))
}

// release writes the archives and the manifest into out.
func release(version string, bins map[string]string, templatePath, licensePath, out string) error {
	tmpl, err := os.ReadFile(templatePath)
	if err != nil {
		return err
	}
	license, err := os.ReadFile(licensePath)
	if err != nil {
		return err
	}
	platforms := Platforms(string(tmpl))
	built := slices.Sorted(func(yield func(string) bool) {
		for p := range bins {
			if !yield(p) {
				return
			}
		}
	})
	if !slices.Equal(slices.Sorted(slices.Values(platforms)), built) {
		return fmt.Errorf("%s names the platforms %v, the binaries are for %v: build every platform it names (PLUGIN_PLATFORMS)", templatePath, platforms, built)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	manifest := strings.ReplaceAll(string(tmpl), "{{VERSION}}", version)
	for _, p := range platforms {
		bin, err := os.ReadFile(bins[p])
		if err != nil {
			return err
		}
		exe := "kubectl-nodeready"
		if strings.HasPrefix(p, "windows/") {
			exe += ".exe"
		}
		archive, err := pack(map[string][]byte{exe: bin, "LICENSE": license})
		if err != nil {
			return err
		}
		name := Archive(version, p)
		sum := sha256.Sum256(archive)
		hexSum := hex.EncodeToString(sum[:])
		if err := os.WriteFile(filepath.Join(out, name), archive, 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, name+".sha256"), []byte(hexSum+"  "+name+"\n"), 0o644); err != nil {
			return err
		}
		manifest = strings.ReplaceAll(manifest, "{{SHA256_"+strings.ReplaceAll(p, "/", "_")+"}}", hexSum)
	}
	return os.WriteFile(filepath.Join(out, "nodeready.yaml"), []byte(manifest), 0o644)
}

// pack returns a tar.gz of files, in name order, with fixed owners and times.
func pack(files map[string][]byte) ([]byte, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		mode := int64(0o644)
		if strings.HasPrefix(n, "kubectl-nodeready") {
			mode = 0o755
		}
		hdr := &tar.Header{Name: n, Mode: mode, Size: int64(len(files[n])), ModTime: time.Unix(0, 0).UTC(), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(files[n]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
