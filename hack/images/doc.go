// Package images holds the programs of the two images `lockstep dev up
// --real-nodes` imports into each real node's containerd, since no registry
// can be reached: lockstep.local/pause:latest (the pod sandbox) and
// lockstep.local/rank:latest (a training rank stand-in). hack/build-tools.sh
// builds them static and writes them as OCI archives to bin/images/.
package images
