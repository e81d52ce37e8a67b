package scheduler

import (
	"context"
	"sync/atomic"

	"golang.org/x/time/rate"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/client-go/tools/events"
)

// pacedSink is the events sink, paced as kube-scheduler's rate-limited
// client paces its events: client-go's broadcaster writes each event in
// its own goroutine, so a gang of 10,000 members that does not fit (an
// event each, as kube-scheduler gives every unschedulable pod) would put
// thousands of writes in flight at once on the scheduler's connection,
// and the scheduling loop's own writes would queue behind them.
type pacedSink struct {
	sink events.EventSink
	pace waiter
}

// waiter is what a paced write waits on.
type waiter interface {
	Wait(ctx context.Context) error
}

func newPacedSink(sink events.EventSink, giveWay func() bool) *pacedSink {
	return &pacedSink{sink: sink, pace: newEventPace(giveWay)}
}

// eventPace paces events at kube-scheduler's client default, and gives
// way as the pod conditions do (pace.go) while more than backlog events
// wait and giveWay says so (Scheduler.eventsGiveWay): the trickle, no
// burst. Events take their turn one at a time: each is written from a
// goroutine of its own, and a thousand that took their places in the
// limiter at once would keep the pace they took them at, whatever came
// after.
type eventPace struct {
	giveWay func() bool
	limiter *rate.Limiter
	// waiting counts the events waiting their turn; backlog is how many
	// may before they give way.
	waiting atomic.Int64
	backlog int64
	// turn admits one waiter at a time; it guards yielding.
	turn     chan struct{}
	yielding bool
}

func newEventPace(giveWay func() bool) *eventPace {
	return &eventPace{giveWay: giveWay, limiter: rate.NewLimiter(pacedQPS, pacedBurst), turn: make(chan struct{}, 1), backlog: giveWayBacklog}
}

func (p *eventPace) Wait(ctx context.Context) error {
	p.waiting.Add(1)
	defer p.waiting.Add(-1)
	select {
	case p.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-p.turn }()
	if fg := p.waiting.Load() > p.backlog && p.giveWay != nil && p.giveWay(); fg != p.yielding {
		p.yielding = fg
		if fg {
			trickle(p.limiter)
		} else {
			restore(p.limiter, pacedQPS, pacedBurst)
		}
	}
	return p.limiter.Wait(ctx)
}

func (s *pacedSink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	if err := s.pace.Wait(ctx); err != nil {
		return nil, err
	}
	return s.sink.Create(ctx, e)
}

func (s *pacedSink) Update(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	if err := s.pace.Wait(ctx); err != nil {
		return nil, err
	}
	return s.sink.Update(ctx, e)
}

func (s *pacedSink) Patch(ctx context.Context, old *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	if err := s.pace.Wait(ctx); err != nil {
		return nil, err
	}
	return s.sink.Patch(ctx, old, data)
}
