package main

import (
	"errors"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/leasekeeper/leasekeeper/service"
)

// addQuotaFlags adds serve's fenced-store quota per lock (service.StoreQuota);
// storeQuota reads it back.
func addQuotaFlags(cmd *cobra.Command) {
	keys, bytes := int64(service.DefaultStoreMaxKeys), int64(service.DefaultStoreMaxBytes)
	cmd.Flags().Var(&limitFlag{&keys}, "store-max-keys",
		"keys the fenced store keeps per lock; a write of one more answers quota_exceeded (0: no limit)")
	cmd.Flags().Var(&limitFlag{&bytes}, "store-max-bytes",
		"bytes of keys and values the fenced store keeps per lock; a write beyond answers quota_exceeded (0: no limit)")
	total := int64(service.DefaultStoreMaxTotal)
	cmd.Flags().Var(&limitFlag{&total}, "store-max-total",
		"bytes of keys and values the fenced store keeps in all, every lock together; a write beyond answers quota_exceeded (0: no limit)")
}

// storeQuota is the quota serve's flags set.
func storeQuota(cmd *cobra.Command) service.StoreQuota {
	get := func(name string) int64 { return *cmd.Flags().Lookup(name).Value.(*limitFlag).v }
	return service.StoreQuota{MaxKeys: get("store-max-keys"), MaxBytes: get("store-max-bytes"), MaxTotal: get("store-max-total")}
}

// limitFlag is a whole number from 0 up, refused at parsing otherwise.
type limitFlag struct{ v *int64 }

func (f *limitFlag) String() string { return strconv.FormatInt(*f.v, 10) }
func (f *limitFlag) Type() string   { return "int" }
func (f *limitFlag) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return errors.New("want a whole number from 0 (no limit) up")
	}
	*f.v = n
	return nil
}
