package process

import (
	"context"
	"time"

	pb "github.com/covesandbox/cove/sdk/go/envdpb/process"
)

// relay forwards a subscription's events to send until the process's end
// event went out, sending a keepalive whenever nothing else was sent for
// interval.
func relay(ctx context.Context, sub *subscriber, interval time.Duration, send func(*pb.ProcessEvent) error) error {
	keepalive := time.NewTimer(interval)
	defer keepalive.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-sub.ch:
			if !ok {
				return nil
			}
			if err := send(ev); err != nil {
				return err
			}
		case <-keepalive.C:
			if err := send(&pb.ProcessEvent{Event: &pb.ProcessEvent_Keepalive{Keepalive: &pb.ProcessEvent_KeepAlive{}}}); err != nil {
				return err
			}
		}
		keepalive.Reset(interval)
	}
}

func startEvent(pid uint32) *pb.ProcessEvent {
	return &pb.ProcessEvent{Event: &pb.ProcessEvent_Start{Start: &pb.ProcessEvent_StartEvent{Pid: pid}}}
}
