package client_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/client"
)

// Status answers the first page of holds; StatusPage any page; AllHolds
// follows the pages to the last.
func TestStatusPaging(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s := newServer(t, nil)
	var names []string
	for i := range 150 {
		names = append(names, fmt.Sprintf("h/%03d", i))
		if _, err := s.AcquireOnce(ctx, names[i], client.AcquireOptions{Client: "many", TTL: 60 * time.Second}); err != nil {
			t.Fatal(err)
		}
	}

	st, err := s.Status(ctx, "many")
	if err != nil || st.Age != 1 || len(st.Holds) != lk.DefaultLocksLimit || st.Next == nil || *st.Next != names[lk.DefaultLocksLimit-1] {
		t.Fatalf("Status = age %d, %d holds, next %v, %v; want the default page of %d", st.Age, len(st.Holds), st.Next, err, lk.DefaultLocksLimit)
	}
	st, err = s.StatusPage(ctx, "many", "h/147", 2)
	if err != nil || len(st.Holds) != 2 || st.Holds[0].Lock != "h/148" || st.Holds[1].Lock != "h/149" || st.Next != nil {
		t.Errorf("StatusPage(after h/147, 2) = %+v, %v; want h/148, h/149, the last page", st, err)
	}
	_, err = s.StatusPage(ctx, "many", "", lk.MaxLocksLimit+1)
	if !errors.Is(err, client.ErrInvalidArguments) {
		t.Errorf("StatusPage(limit 1001): %v, want invalid_arguments", err)
	}

	var got []string
	for h, err := range s.AllHolds(ctx, "many") {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, h.Lock)
	}
	if fmt.Sprint(got) != fmt.Sprint(names) {
		t.Errorf("AllHolds = %d holds %v; want the 150 in name order", len(got), got)
	}
	for h, err := range s.AllHolds(ctx, "nobody") {
		t.Errorf("AllHolds(nobody) yielded %+v, %v", h, err)
	}
}
