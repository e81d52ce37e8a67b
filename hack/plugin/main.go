// Command plugin packages kubectl-lockstep for krew: one archive per
// platform (the binary and LICENSE) and the krew manifest rendered from the
// template .krew.yaml with each archive's SHA-256.
//
//	go run ./hack/plugin -tag v0.1.0 -out bin/plugin linux/amd64=bin/linux-amd64/kubectl-lockstep ...
//
// The template is in krew-release-bot's format, so a release pipeline may
// render it with the bot instead; this renders it the same way from local
// archives, for `make plugin` and test/plugin.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"text/template"
	"time"
)

func main() {
	tag := flag.String("tag", "", "release tag, e.g. v0.1.0")
	out := flag.String("out", "bin/plugin", "directory for the archives and lockstep.yaml")
	tmpl := flag.String("template", ".krew.yaml", "krew manifest template")
	license := flag.String("license", "LICENSE", "license file put in every archive")
	flag.Parse()
	if err := run(*tag, *out, *tmpl, *license, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "plugin:", err)
		os.Exit(1)
	}
}

func run(tag, out, tmplPath, license string, platforms []string) error {
	if tag == "" || len(platforms) == 0 {
		return fmt.Errorf("usage: plugin -tag TAG [-out DIR] OS/ARCH=BINARY …")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	lic, err := os.ReadFile(license)
	if err != nil {
		return err
	}
	for _, p := range platforms {
		platform, binary, ok := strings.Cut(p, "=")
		osName, arch, ok2 := strings.Cut(platform, "/")
		if !ok || !ok2 {
			return fmt.Errorf("%q: want OS/ARCH=BINARY", p)
		}
		bin, err := os.ReadFile(binary)
		if err != nil {
			return err
		}
		name := "kubectl-lockstep"
		if osName == "windows" {
			name += ".exe"
		}
		archive, err := tarGz(map[string][]byte{name: bin, "LICENSE": lic}, []string{name, "LICENSE"})
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, fmt.Sprintf("kubectl-lockstep_%s_%s.tar.gz", osName, arch)), archive, 0o644); err != nil {
			return err
		}
	}
	manifest, err := render(tmplPath, tag, out)
	if err != nil {
		return err
	}
	dest := filepath.Join(out, "lockstep.yaml")
	if err := os.WriteFile(dest, manifest, 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s and %d archives (%s)\n", dest, len(platforms), tag)
	return nil
}

// render executes the template as krew-release-bot does: .TagName is the
// tag; addURIAndSha URL TAG writes the archive's uri (with {{ .TagName }} in
// it replaced) and the sha256 of the archive of that name in dir.
func render(tmplPath, tag, dir string) ([]byte, error) {
	src, err := os.ReadFile(tmplPath)
	if err != nil {
		return nil, err
	}
	funcs := template.FuncMap{"addURIAndSha": func(url, tag string) (string, error) {
		url = strings.ReplaceAll(url, "{{ .TagName }}", tag)
		b, err := os.ReadFile(filepath.Join(dir, path.Base(url)))
		if err != nil {
			return "", fmt.Errorf("archive for %s: %w", url, err)
		}
		sum := sha256.Sum256(b)
		return fmt.Sprintf("uri: %s\n    sha256: %s", url, hex.EncodeToString(sum[:])), nil
	}}
	t, err := template.New(filepath.Base(tmplPath)).Funcs(funcs).Option("missingkey=error").Parse(string(src))
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, map[string]string{"TagName": tag}); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// tarGz archives files in order, executable where they are binaries, with a
// fixed time so the same inputs give the same archive.
func tarGz(files map[string][]byte, order []string) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, name := range order {
		mode := int64(0o644)
		if name != "LICENSE" {
			mode = 0o755
		}
		h := &tar.Header{Name: name, Mode: mode, Size: int64(len(files[name])), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(files[name]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
