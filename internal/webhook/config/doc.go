// Package config is Lockstep's admission configuration as objects, with
// no server and no client: the two webhook configurations
// (Configurations: which requests reach which webhook, failure policies,
// CEL match conditions that keep the webhook off every path it has nothing
// to judge), the paths the webhook server serves them on, and the
// admission policy that confines the webhook's identity to the CA bundle
// (CAPolicy). hack/chartgen renders them into the Helm chart, the local
// control plane installs them (webhook.Install), and the webhook server
// registers its handlers at their paths — one source for all three.
package config
