package leasekeeper

// The explanations answers carry (issue "see and explain"): who held a lock
// before a grant, and why a deadlock victim was chosen. A client id that a
// client principal may not act as is shown as null (a nil pointer): the
// shape of the explanation stays, the name does not leak.

// Predecessor is a lease whose end made a grant possible.
type Predecessor struct {
	Client  *string `json:"client"`
	Token   int64   `json:"token"`
	Mode    Mode    `json:"mode"`
	Ended   Ending  `json:"ended"`
	EndedAt int64   `json:"ended_at"`
}

// CycleMember is one client of the set of clients on wait cycles through
// the requester (D4), with the lock it waits for.
type CycleMember struct {
	Client   *string `json:"client"`
	Age      int64   `json:"age"`
	WaitsFor string  `json:"waits_for"`
}

// Abort explains one deadlock victim: its age, and the cycle set it was
// chosen from (oldest first) as it stood when it was chosen, the youngest.
type Abort struct {
	Victim *string       `json:"victim"`
	Age    int64         `json:"age"`
	Cycle  []CycleMember `json:"cycle"`
}

// endingRank ranks endings for a job that must decide whether its
// predecessor left work half-done: anything but a release is worse than a
// release; a lapse is the worst (nobody stopped it).
var endingRank = map[Ending]int{EndReleased: 0, EndAborted: 1, EndRevoked: 2, EndLapsed: 3}

// WorstEnding returns the worst of the predecessors' endings, "" when there
// are none.
func WorstEnding(ps []Predecessor) Ending {
	var worst Ending
	for _, p := range ps {
		if worst == "" || endingRank[p.Ended] > endingRank[worst] {
			worst = p.Ended
		}
	}
	return worst
}
