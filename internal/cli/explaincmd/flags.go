package explaincmd

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// flags are kubectl's connection flags (cli-runtime: --kubeconfig,
// --context, -n, --as, …) and -o.
type flags struct {
	config *genericclioptions.ConfigFlags
	output string
	// outputs are the -o values the command accepts.
	outputs []string
}

func newFlags(outputs ...string) *flags {
	return &flags{config: genericclioptions.NewConfigFlags(true), outputs: outputs}
}

func (f *flags) add(cmd *cobra.Command) {
	f.config.AddFlags(cmd.Flags())
	cmd.Flags().StringVarP(&f.output, "output", "o", "", "output format: "+strings.Join(f.outputs, ", ")+" (default: a table or the report)")
}

func (f *flags) validate() error {
	if f.output == "" {
		return nil
	}
	for _, o := range f.outputs {
		if f.output == o {
			return nil
		}
	}
	return fmt.Errorf("-o %q: want one of %s", f.output, strings.Join(f.outputs, ", "))
}

func (f *flags) clients() (kubernetes.Interface, dynamic.Interface, string, error) {
	cfg, err := f.config.ToRESTConfig()
	if err != nil {
		return nil, nil, "", err
	}
	ns, _, err := f.config.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, nil, "", err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, "", err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	return client, dyn, ns, err
}

// typeName reads kubectl's TYPE NAME or TYPE/NAME arguments; name may be
// optional (get). It returns the type lowercased.
func typeName(args []string, nameRequired bool) (string, string, error) {
	switch {
	case len(args) == 1 && strings.Contains(args[0], "/"):
		t, n, _ := strings.Cut(args[0], "/")
		if t == "" || n == "" {
			return "", "", fmt.Errorf("%q: want TYPE/NAME", args[0])
		}
		return strings.ToLower(t), n, nil
	case len(args) == 1 && !nameRequired:
		return strings.ToLower(args[0]), "", nil
	case len(args) == 2 && !strings.Contains(args[0], "/"):
		return strings.ToLower(args[0]), args[1], nil
	}
	return "", "", fmt.Errorf("want TYPE NAME or TYPE/NAME, got %q", strings.Join(args, " "))
}

// printStructured writes v as JSON or YAML.
func printStructured(out io.Writer, format string, v any) error {
	switch format {
	case "json":
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = out.Write(b)
		return err
	}
	return fmt.Errorf("not a structured format: %s", format)
}
