package bench

import (
	"context"

	"github.com/infer-exporter/infer_exporter/probe/workload"
)

// closedLoad is a closed loop of the cell's clients, each sending its next
// request when its previous one ends: the loop follows the requests
// itself, for the slot each ended request frees.
type closedLoad struct {
	promptLoad
	loop *closedLoop
}

// newClosedLoad builds the loop of a shard's share of the cell's clients
// (all of them without shards); nil when the share is none: the other
// shards have every client.
func newClosedLoad(ctx context.Context, shard Shard, prompts *PromptSet, p repeatPlan) *closedLoad {
	clients, split := int(p.group.load.Value), shard.On()
	if split {
		clients = shard.share(clients)
	}
	if clients == 0 {
		return nil
	}
	loop := newClosedLoop(ctx, clients)
	return &closedLoad{loop: loop, promptLoad: promptLoad{sched: loop, cursor: prompts.Cursor(p.target.Name, p.group.name, p.index),
		lim: workload.Limits{MaxInFlight: clients, Burst: 1}, fixedWarmup: split}}
}

// source is the open loop's, its schedule the clients' slots, and the loop
// the observer that frees them.
func (l *closedLoad) source(stop *stopSchedule) (workload.Source, workload.Observer) {
	src, _ := l.promptLoad.source(stop)
	return src, l.loop
}
