package dev

import (
	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/lockstep-dev/lockstep/internal/cli/clientopts"
	"github.com/lockstep-dev/lockstep/internal/devcluster/gpudriver"
)

// newGPUDriverCommand is `lockstep dev gpu-driver`: the simulated-GPU DRA
// driver `dev up --real-nodes` runs beside each real node's kubelet.
func newGPUDriverCommand() *cobra.Command {
	var cfg gpudriver.Config
	conn := clientopts.ForComponent()
	cmd := &cobra.Command{
		Use:   "gpu-driver --node NAME --kubeconfig FILE --kubelet-dir DIR --cdi-dir DIR --state-dir DIR",
		Short: "Run the simulated-GPU DRA kubelet plugin of one real node (started by `dev up --real-nodes`)",
		Long: `Runs the simulated-GPU DRA driver of one real node of the local cluster as a
kubelet plugin: it publishes the node's ResourceSlice (--devices GPUs of
--driver, with the model, index, pcieRoot and clique attributes the simulated
nodes' GPUs carry), prepares claims for the kubelet and injects each device
into the container through CDI (GPU_DEVICE_<index>=<device> and the file
/run/lockstep/devices/<device>), and reports device health: a device named on
a line of <state-dir>/unhealthy is reported unhealthy, which the kubelet
writes into the pod's allocatedResourcesStatus. ` + "`lockstep dev up --real-nodes N`" + ` starts
one per node; you do not need to run it yourself.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := conn.Complete(); err != nil {
				return err
			}
			client, err := kubernetes.NewForConfig(conn.Config)
			if err != nil {
				return err
			}
			return gpudriver.Run(cmd.Context(), client, cfg)
		},
	}
	f := cmd.Flags()
	conn.AddFlags(f) // --kubeconfig, --context: `dev up` passes the node's identity (system:node:<name>)
	f.StringVar(&cfg.Node, "node", "", "the node's name (also its pool's)")
	f.StringVar(&cfg.Driver, "driver", gpudriver.DefaultDriver, "driver name")
	f.IntVar(&cfg.Devices, "devices", 2, "GPUs the node has")
	f.StringVar(&cfg.Model, "model", gpudriver.DefaultModel, "the devices' model attribute")
	f.StringVar(&cfg.KubeletDir, "kubelet-dir", "", "the kubelet's --root-dir")
	f.StringVar(&cfg.CDIDir, "cdi-dir", "", "directory the node's containerd reads CDI specs from")
	f.StringVar(&cfg.StateDir, "state-dir", "", "the driver's own directory: device files, the unhealthy list, what it prepared")
	return cmd
}
