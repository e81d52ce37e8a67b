package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"sigs.k8s.io/karpenter/pkg/operator/options"
	"sigs.k8s.io/karpenter/pkg/utils/env"
)

// Options are this command's flags beside Karpenter's and kwok's, parsed
// with them (a Karpenter options.Injectable: one flag set takes every
// injectable's flags, so each must know all of them).
type Options struct {
	// CapacityNamespace holds the karpenter-capacity ConfigMap.
	CapacityNamespace string
}

var _ options.Injectable = (*Options)(nil)

type optionsKey struct{}

// AddFlags adds --capacity-namespace (CAPACITY_NAMESPACE).
func (o *Options) AddFlags(fs *options.FlagSet) {
	fs.StringVar(&o.CapacityNamespace, "capacity-namespace", env.WithDefaultString("CAPACITY_NAMESPACE", "karpenter"),
		"Namespace of the ConfigMap "+capacityConfigMap+" that limits launches per instance type and zone")
}

// Parse parses the command line.
func (o *Options) Parse(fs *options.FlagSet, args ...string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		return fmt.Errorf("parsing flags, %w", err)
	}
	return nil
}

// ToContext stores o in ctx.
func (o *Options) ToContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, optionsKey{}, o)
}

// FromContext is the Options ToContext stored.
func FromContext(ctx context.Context) *Options {
	o, _ := ctx.Value(optionsKey{}).(*Options)
	return o
}
