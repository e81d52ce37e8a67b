// Package image checks the OCI archive `make image` writes (bin/, built by
// `make test` first): an OCI image layout with one multi-platform index of
// linux/amd64 and linux/arm64 images, each a static lockstep binary on an
// empty base, run as a non-root user, with OCI labels; the amd64 entrypoint
// is unpacked and run (`lockstep version`); skopeo copies both platforms out
// of the archive as a push to a registry would.
package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Annotations map[string]string `json:"annotations"`
	Platform    *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

type index struct {
	Manifests []descriptor `json:"manifests"`
}

type manifest struct {
	Config descriptor   `json:"config"`
	Layers []descriptor `json:"layers"`
}

type config struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Config       struct {
		User       string            `json:"User"`
		Entrypoint []string          `json:"Entrypoint"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
}

func TestImage(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	blobs := readArchive(t, filepath.Join(root, "bin", "lockstep-image.tar"))
	var top index
	unmarshal(t, blobs["index.json"], &top)
	if len(top.Manifests) != 1 || top.Manifests[0].Annotations["org.opencontainers.image.ref.name"] == "" {
		t.Fatalf("want one image named by its tag in index.json, got %+v", top.Manifests)
	}
	var platforms index
	unmarshal(t, blob(t, blobs, top.Manifests[0].Digest), &platforms)
	seen := map[string]bool{}
	for _, d := range platforms.Manifests {
		if d.Platform == nil {
			t.Fatalf("manifest %s has no platform", d.Digest)
		}
		arch := d.Platform.Architecture
		seen[d.Platform.OS+"/"+arch] = true
		var m manifest
		unmarshal(t, blob(t, blobs, d.Digest), &m)
		var c config
		unmarshal(t, blob(t, blobs, m.Config.Digest), &c)
		if c.Config.User == "" || strings.HasPrefix(c.Config.User, "0") || c.Config.User == "root" {
			t.Errorf("%s: runs as %q; want a non-root user", arch, c.Config.User)
		}
		for _, l := range []string{"org.opencontainers.image.version", "org.opencontainers.image.source", "org.opencontainers.image.licenses"} {
			if c.Config.Labels[l] == "" {
				t.Errorf("%s: label %s missing", arch, l)
			}
		}
		if len(c.Config.Entrypoint) != 1 || c.Config.Entrypoint[0] != "/lockstep" || len(m.Layers) != 1 {
			t.Fatalf("%s: want entrypoint /lockstep in one layer, got %v, %d layers", arch, c.Config.Entrypoint, len(m.Layers))
		}
		files := untar(t, blob(t, blobs, m.Layers[0].Digest))
		bin := files["lockstep"]
		f, err := elf.NewFile(bytes.NewReader(bin))
		if err != nil {
			t.Fatalf("%s: /lockstep is not an ELF binary: %v", arch, err)
		}
		want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
		if f.Machine != want {
			t.Errorf("%s: binary is for %v", arch, f.Machine)
		}
		if interp := f.Section(".interp"); interp != nil {
			t.Errorf("%s: binary is dynamically linked (an empty base has no libc)", arch)
		}
		if !strings.Contains(string(files["etc/passwd"]), ":65532:") {
			t.Errorf("%s: /etc/passwd has no entry for the non-root user", arch)
		}
		if arch == "amd64" {
			path := filepath.Join(t.TempDir(), "lockstep")
			if err := os.WriteFile(path, bin, 0o755); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(path, "version").CombinedOutput()
			if err != nil || !strings.HasPrefix(string(out), "lockstep ") {
				t.Errorf("running the image's entrypoint: %v: %s", err, out)
			}
		}
	}
	for _, p := range []string{"linux/amd64", "linux/arm64"} {
		if !seen[p] {
			t.Errorf("no %s image", p)
		}
	}
	if _, ok := blobs["manifest.json"]; !ok {
		t.Errorf("no manifest.json: docker load would not take the archive")
	}
	copyWithSkopeo(t, filepath.Join(root, "bin", "lockstep-image.tar"))
}

// copyWithSkopeo copies every platform of the archive into an OCI layout
// directory with skopeo, as `skopeo copy --all oci-archive:… docker://…`
// would to a registry, and inspects each platform's copy.
func copyWithSkopeo(t *testing.T, archive string) {
	t.Helper()
	dest := "oci:" + filepath.Join(t.TempDir(), "layout") + ":lockstep"
	if out, err := exec.Command("skopeo", "copy", "--all", "oci-archive:"+archive, dest).CombinedOutput(); err != nil {
		t.Fatalf("skopeo copy --all: %v\n%s", err, out)
	}
	for _, arch := range []string{"amd64", "arm64"} {
		out, err := exec.Command("skopeo", "inspect", "--override-os", "linux", "--override-arch", arch, dest).CombinedOutput()
		if err != nil {
			t.Fatalf("skopeo inspect (%s): %v\n%s", arch, err, out)
		}
		var got struct{ Architecture, Os string }
		unmarshal(t, out, &got)
		if got.Architecture != arch || got.Os != "linux" {
			t.Errorf("skopeo resolves linux/%s to %s/%s", arch, got.Os, got.Architecture)
		}
	}
}

func readArchive(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("%v (make test builds it with make image)", err)
	}
	defer f.Close()
	out := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = b
	}
}

func blob(t *testing.T, blobs map[string][]byte, digest string) []byte {
	t.Helper()
	b, ok := blobs["blobs/"+strings.Replace(digest, ":", "/", 1)]
	if !ok {
		t.Fatalf("blob %s missing", digest)
	}
	return b
}

func untar(t *testing.T, layer []byte) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	zr, err := gzip.NewReader(bytes.NewReader(layer))
	if err != nil {
		t.Fatalf("layer is not tar+gzip: %v", err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out[strings.TrimPrefix(h.Name, "/")] = b
	}
}

func unmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}
