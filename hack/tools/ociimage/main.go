// Command ociimage builds Lockstep's container image from binaries already
// built for each platform, with no base image to download: one layer with
// the static binary at /lockstep and a passwd/group entry for the non-root
// user it runs as (65532, "nonroot"), OCI labels, and an index over the
// platforms. It writes one archive that is an OCI image layout (index.json,
// oci-layout, blobs/ — what `skopeo copy oci-archive:…` and `crane` read) and
// also carries a Docker manifest.json for the first platform, so
// `docker load` takes it too.
//
//	ociimage -out bin/lockstep-image.tar -tag ghcr.io/lockstep-dev/lockstep:v0.3.0 \
//	  -version v0.3.0 -source https://github.com/lockstep-dev/lockstep \
//	  linux/amd64=bin/linux-amd64/lockstep linux/arm64=bin/linux-arm64/lockstep
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	uid  = 65532
	user = "nonroot"
)

func main() {
	out := flag.String("out", "bin/lockstep-image.tar", "archive to write")
	tag := flag.String("tag", "ghcr.io/lockstep-dev/lockstep:dev", "image reference recorded in the archive")
	version := flag.String("version", "dev", "org.opencontainers.image.version")
	source := flag.String("source", "https://github.com/lockstep-dev/lockstep", "org.opencontainers.image.source")
	license := flag.String("license", "Apache-2.0", "org.opencontainers.image.licenses")
	name := flag.String("name", "lockstep", "the binary's name in the image (/NAME, the entrypoint) and the image title")
	flag.Parse()
	if flag.NArg() == 0 {
		fail(fmt.Errorf("want PLATFORM=BINARY arguments, e.g. linux/amd64=bin/linux-amd64/lockstep"))
	}
	labels := map[string]string{
		"org.opencontainers.image.title":    *name,
		"org.opencontainers.image.version":  *version,
		"org.opencontainers.image.source":   *source,
		"org.opencontainers.image.licenses": *license,
	}
	if *name == "lockstep" {
		labels["org.opencontainers.image.description"] = "Gang-aware, DRA-native batch scheduler for Kubernetes: " +
			"scheduler, controllers and admission webhook in one binary"
	}
	tagName := "latest"
	if i := strings.LastIndex(*tag, ":"); i > strings.LastIndex(*tag, "/") {
		tagName = (*tag)[i+1:]
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var first v1.Image
	for _, arg := range flag.Args() {
		platform, bin, ok := strings.Cut(arg, "=")
		if !ok {
			fail(fmt.Errorf("%q: want PLATFORM=BINARY", arg))
		}
		img, err := image(platform, *name, bin, labels)
		if err != nil {
			fail(err)
		}
		if first == nil {
			first = img
		}
		os, arch, _ := strings.Cut(platform, "/")
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: os, Architecture: arch},
		}})
	}
	if err := write(*out, *tag, tagName, idx, first); err != nil {
		fail(err)
	}
	fmt.Printf("wrote %s (%s, %d platforms)\n", *out, *tag, flag.NArg())
}

// image is one platform's image: the binary and the user, on nothing.
func image(platform, name, bin string, labels map[string]string) (v1.Image, error) {
	b, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	files := []struct {
		name string
		mode int64
		body []byte
	}{
		{"etc/passwd", 0o644, []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:/home/%s:/sbin/nologin\n", user, uid, uid, user, user))},
		{"etc/group", 0o644, []byte(fmt.Sprintf("root:x:0:\n%s:x:%d:\n", user, uid))},
		{name, 0o755, b},
	}
	for _, d := range []string{"etc/", "tmp/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: epoch}); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.body)), ModTime: epoch}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	l, err := tarball.LayerFromReader(bytes.NewReader(data), tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), l)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	osName, arch, _ := strings.Cut(platform, "/")
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = osName, arch
	cf.Created = v1.Time{Time: epoch}
	cf.Config.Entrypoint = []string{"/" + name}
	cf.Config.User = fmt.Sprintf("%d:%d", uid, uid)
	cf.Config.WorkingDir = "/"
	cf.Config.Labels = labels
	cf.Config.Env = []string{"PATH=/"}
	return mutate.ConfigFile(img, cf)
}

// write stores the multi-platform index as the one image of an OCI layout
// (named by tag, as skopeo's oci-archive:FILE:TAG and containerd expect),
// adds a Docker manifest.json for first, and tars it all into out.
func write(out, ref, tag string, idx v1.ImageIndex, first v1.Image) error {
	dir, err := os.MkdirTemp("", "lockstep-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": tag,
		"io.containerd.image.name":          ref,
	})); err != nil {
		return err
	}
	cfgName, err := first.ConfigName()
	if err != nil {
		return err
	}
	layers, err := first.Layers()
	if err != nil {
		return err
	}
	var layerPaths []string
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		layerPaths = append(layerPaths, fmt.Sprintf("%q", "blobs/sha256/"+d.Hex))
	}
	manifest := fmt.Sprintf(`[{"Config":%q,"RepoTags":[%q],"Layers":[%s]}]`, "blobs/sha256/"+cfgName.Hex, ref, strings.Join(layerPaths, ","))
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(manifest), 0o644); err != nil {
		return err
	}
	return tarDir(dir, out)
}

func tarDir(dir, out string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			hdr.Name += "/"
		}
		hdr.ModTime = time.Unix(0, 0)
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if info.IsDir() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "ociimage:", err)
	os.Exit(1)
}
