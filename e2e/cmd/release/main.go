// Command release assembles the parts of a release that `make release` does not build with
// another tool, into the release's directory (dist/):
//
//	go run ./cmd/release manifests -image ghcr.io/nodeready/nodeready@sha256:... -out ../dist/install.yaml ../manifests
//	go run ./cmd/release chart -image ghcr.io/nodeready/nodeready@sha256:... -created 1764806400 -out ../dist/chart ../charts/nodeready
//	go run ./cmd/release sums ../dist
//
// manifests joins the files `kubectl apply -f manifests/` applies (the directory's .yaml files,
// in kubectl's order) into one file, the agent image named by digest: what
// `kubectl apply -f install.yaml` installs is what the directory installs, with the image
// that was signed. chart copies the chart with values.yaml's image.repository and image.digest
// (and its Artifact Hub image) set to that image, each file's time set to -created, so
// `helm package` of the copy gives the same archive from any checkout. sums writes SHA256SUMS,
// as `sha256sum --check SHA256SUMS` reads it, over the directory's files.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Repo is the repository the sources name the agent image by.
const Repo = "ghcr.io/nodeready/nodeready"

// SumsFile is the name of the checksums file.
const SumsFile = "SHA256SUMS"

func main() { os.Exit(run(os.Args[1:], os.Stderr)) }

func run(args []string, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "release: manifests, chart or sums")
		return 2
	}
	fs := flag.NewFlagSet("release "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	image := fs.String("image", "", "the agent image by digest, REPOSITORY@sha256:... (manifests, chart)")
	out := fs.String("out", "", "the file (manifests) or directory (chart) to write")
	created := fs.String("created", "", "the time of every file of the chart's copy, in Unix seconds (chart)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "release %s: one directory, and nothing else\n", args[0])
		return 2
	}
	var err error
	switch args[0] {
	case "manifests", "chart":
		repo, digest, ok := strings.Cut(*image, "@")
		if !ok || !digestRE.MatchString(digest) || repo == "" || *out == "" {
			fmt.Fprintf(stderr, "release %s: -image REPOSITORY@sha256:<64 hex> and -out are required\n", args[0])
			return 2
		}
		if args[0] == "manifests" {
			err = manifests(fs.Arg(0), *image, *out)
			break
		}
		secs, perr := strconv.ParseInt(*created, 10, 64)
		if perr != nil {
			fmt.Fprintln(stderr, "release chart: -created (Unix seconds) is required")
			return 2
		}
		err = chart(fs.Arg(0), repo, digest, time.Unix(secs, 0), *out)
	case "sums":
		err = sums(fs.Arg(0))
	default:
		fmt.Fprintf(stderr, "release: unknown command %q: manifests, chart or sums\n", args[0])
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "release %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

var (
	digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	// imageRE finds the agent image by tag in a manifest's container.
	imageRE = regexp.MustCompile(`(?m)^(\s*(?:- )?image: )` + regexp.QuoteMeta(Repo) + `:\S+$`)
)

// manifests writes the .yaml files of dir, in the order kubectl applies them (by name), as
// one file with the agent image replaced by image.
func manifests(dir, image, out string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("%s holds no .yaml file", dir)
	}
	slices.Sort(files)
	var b strings.Builder
	pinned := 0
	for i, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		s := imageRE.ReplaceAllString(string(text), "${1}"+image)
		pinned += len(imageRE.FindAllString(string(text), -1))
		if i > 0 {
			b.WriteString("---\n")
		}
		fmt.Fprintf(&b, "# %s\n", filepath.Base(f))
		b.WriteString(strings.TrimPrefix(s, "---\n"))
		if !strings.HasSuffix(s, "\n") {
			b.WriteString("\n")
		}
	}
	if pinned == 0 {
		return fmt.Errorf("%s names no image %s:TAG to pin", dir, Repo)
	}
	return os.WriteFile(out, []byte(b.String()), 0o644)
}

var (
	// valuesImage finds values.yaml's top-level image: block.
	valuesImage = regexp.MustCompile(`(?m)^image:\n(?:(?:[ \t]+.*|[ \t]*#.*|)\n)*`)
	repoLine    = regexp.MustCompile(`(?m)^(\s+repository: ).*$`)
	digestLine  = regexp.MustCompile(`(?m)^(\s+digest: ).*$`)
	// annotationImage finds the image of Chart.yaml's artifacthub.io/images annotation.
	annotationImage = regexp.MustCompile(`(?m)^(\s*image: )` + regexp.QuoteMeta(Repo) + `:\S+$`)
)

// chart copies the chart at dir into out/<its name>, its image set to repo@digest.
func chart(dir, repo, digest string, created time.Time, out string) error {
	dst := filepath.Join(out, filepath.Base(dir))
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if e.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !e.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file", path)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		switch rel {
		case "values.yaml":
			block := valuesImage.Find(b)
			if block == nil || !repoLine.Match(block) || !digestLine.Match(block) {
				return fmt.Errorf("%s: no image: block with repository and digest", path)
			}
			pinned := repoLine.ReplaceAll(block, []byte("${1}"+repo))
			pinned = digestLine.ReplaceAll(pinned, []byte(`${1}"`+digest+`"`))
			b = valuesImage.ReplaceAllLiteral(b, pinned)
		case "Chart.yaml":
			b = annotationImage.ReplaceAll(b, []byte("${1}"+repo+"@"+digest))
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		return err
	}
	// helm package keeps each file's time: one time for all makes the archive the same
	// whenever the checkout was made.
	return filepath.WalkDir(dst, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(path, created, created)
	})
}

// sums writes dir/SHA256SUMS over the regular files of dir, not its subdirectories (the
// image's OCI layout is named by its digest).
func sums(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, e := range entries {
		if !e.Type().IsRegular() || e.Name() == SumsFile {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(sum[:]), e.Name())
	}
	return os.WriteFile(filepath.Join(dir, SumsFile), []byte(b.String()), 0o644)
}
