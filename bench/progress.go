package bench

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// IsTerminal reports whether f is a character device (a terminal), where a
// progress bar belongs; logs and pipes get none.
func IsTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progress draws a one-line progress bar, redrawn in place. A nil *progress
// draws nothing.
type progress struct {
	w     io.Writer
	total int
	start time.Time

	mu    sync.Mutex
	done  int
	label string
	quit  chan struct{}
	wg    sync.WaitGroup
}

func newProgress(w io.Writer, total int) *progress {
	if w == nil {
		return nil
	}
	p := &progress{w: w, total: total, start: time.Now(), quit: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.quit:
				return
			case <-t.C:
				p.draw()
			}
		}
	}()
	return p
}

// begin names the work in progress.
func (p *progress) begin(label string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.label = label
	p.mu.Unlock()
	p.draw()
}

// step counts one unit of the total done.
func (p *progress) step() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.done++
	p.mu.Unlock()
	p.draw()
}

func (p *progress) draw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	const width = 30
	done := min(p.done, p.total)
	filled := 0
	if p.total > 0 {
		filled = width * done / p.total
	}
	elapsed := time.Since(p.start).Truncate(time.Second)
	eta := "?"
	if done > 0 && done < p.total {
		eta = (elapsed / time.Duration(done) * time.Duration(p.total-done)).Truncate(time.Second).String()
	}
	fmt.Fprintf(p.w, "\r\033[K[%s%s] %d/%d  %s elapsed, eta %s  %s",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), done, p.total, elapsed, eta, p.label)
}

// close stops redrawing and ends the line.
func (p *progress) close() {
	if p == nil {
		return
	}
	close(p.quit)
	p.wg.Wait()
	p.draw()
	fmt.Fprintln(p.w)
}
