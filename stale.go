package leasekeeper

// StaleRequest reports that Client's token on Lock was refused as stale by
// a fence outside the service (package fence, docs/fencing.md): Newer had
// already written to Resource in the job's own database. The service only
// counts and shows it: by then the refused transaction has rolled back, and
// the report is never on the write's path. Not an operation of the
// contract.
type StaleRequest struct {
	Client   string `json:"client"`
	Lock     string `json:"lock"`
	Token    int64  `json:"token"`
	Newer    int64  `json:"newer"`
	Resource string `json:"resource"`
}

func (r StaleRequest) Validate() error {
	if err := nonEmpty("client", r.Client, "lock", r.Lock, "resource", r.Resource); err != nil {
		return err
	}
	if r.Token < 1 || r.Newer <= r.Token {
		return Errorf(CodeInvalidArguments, "token must be 1 or more, and newer above it")
	}
	return nil
}

// StaleResult is the answer to a stale report: "ok".
type StaleResult struct {
	Outcome Outcome `json:"outcome"`
}
