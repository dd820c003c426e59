package console_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestConsoleLongClientID: a 256-byte client id (the longest there is)
// holding a lock leaves the locks table within its card, the queue and
// oldest-wait columns on screen.
func TestConsoleLongClientID(t *testing.T) {
	ctx := browser(t)
	s := startServer(t, "")
	long := strings.Repeat("c", 256)
	s.acquire(t, "", long, "long-holder", 600)
	s.acquire(t, "", "waiter", "long-holder", 600)
	if err := chromedp.Do(ctx, chromedp.Navigate(s.url+"/")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, 15*time.Second, "the locks list with long-holder", row("long-holder"), `document.body.innerText`)
	screenshot(t, ctx, shots(t), "long-client-id")
	fits := `(() => {
		const card = document.getElementById('locks-pane').getBoundingClientRect();
		const table = document.getElementById('locks').getBoundingClientRect();
		const oldest = ` + row("long-holder") + `.querySelector('.oldest').getBoundingClientRect();
		return JSON.stringify({card: [card.left, card.right], table: [table.left, table.right], oldest: oldest.right, view: window.innerWidth});
	})()`
	got := eval[string](t, ctx, fits)
	ok := eval[bool](t, ctx, `(() => {
		const card = document.getElementById('locks-pane').getBoundingClientRect();
		const table = document.getElementById('locks').getBoundingClientRect();
		const oldest = `+row("long-holder")+`.querySelector('.oldest').getBoundingClientRect();
		return table.right <= card.right + 1 && oldest.right <= card.right + 1 && card.right <= window.innerWidth + 1;
	})()`)
	if !ok {
		t.Errorf("the locks table does not fit its card with a 256-byte client id: %s", got)
	}
	// The lock's own view, and the client's, keep the page within the
	// window too.
	for _, view := range []string{"#lock=long-holder", "#client=" + long} {
		if err := chromedp.Do(ctx, setJS(`location.hash = `+js(view))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		wide := eval[string](t, ctx, `[...document.querySelectorAll('.card')].filter(c => c.offsetParent && c.scrollWidth > c.clientWidth + 1).map(c => c.id || c.className).join(' ') +
			(document.documentElement.scrollWidth > window.innerWidth + 1 ? ' (the page)' : '')`)
		if wide != "" {
			t.Errorf("%s: wider than their space: %s", view, wide)
		}
	}
	if title := eval[string](t, ctx, row("long-holder")+`.querySelector('.holder .client-link').title`); title != long {
		t.Errorf("the holder's link has title %q, want the whole client id", title)
	}
}
