package scheduler

import (
	"context"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/flowcontrol"
)

// pacedSink is the events sink, paced as kube-scheduler's rate-limited
// client paces its events: client-go's broadcaster writes each event in
// its own goroutine, so a gang of 10,000 members that does not fit (an
// event each, as kube-scheduler gives every unschedulable pod) would put
// thousands of writes in flight at once on the scheduler's connection,
// and the scheduling loop's own writes would queue behind them.
type pacedSink struct {
	sink events.EventSink
	pace flowcontrol.RateLimiter
}

func newPacedSink(sink events.EventSink) *pacedSink {
	return &pacedSink{sink: sink, pace: flowcontrol.NewTokenBucketRateLimiter(pacedQPS, pacedBurst)}
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
