// The franz-go side of scripts/bench failover: the loop of bench/src/failover.rs consume
// on kgo.ShareGroup. Poll (100 ms), Ack(AckAccept) every record, FlushAcks after every poll
// (franz-go's commit), until N distinct records were accepted; the events file has the lines
// ours writes (see bench/src/failover.rs), wall-clock milliseconds since the epoch. The
// ack callback reports partitions, not offsets: its F lines carry -1 offsets.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func nowMs() string { return fmt.Sprintf("%.3f", float64(time.Now().UnixNano())/1e6) }

func oneLine(e error) string { return strings.NewReplacer("\n", " ", "\r", " ").Replace(e.Error()) }

func failover(argv []string) {
	fs := flag.NewFlagSet("failover", flag.ExitOnError)
	bootstrap := fs.String("bootstrap", "", "bootstrap servers")
	topic := fs.String("topic", "", "topic")
	group := fs.String("group", "", "share group")
	n := fs.Int("records", 0, "distinct records to accept")
	eventsPath := fs.String("events", "", "events file")
	signalAt := fs.Int("signal-at", 0, "create --signal-file after this many distinct records")
	signalFile := fs.String("signal-file", "", "file to create")
	timeoutS := fs.Int("timeout-s", 180, "give up after this many seconds")
	_ = fs.Parse(argv)

	f, err := os.Create(*eventsPath)
	if err != nil {
		die("%v", err)
	}
	w := bufio.NewWriter(f)
	var mu sync.Mutex
	event := func(format string, a ...any) {
		mu.Lock()
		fmt.Fprintf(w, format+"\n", a...)
		mu.Unlock()
	}
	event("S %s", nowMs())
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(*bootstrap, ",")...),
		kgo.ClientID("franz-go-failover-bench"),
		kgo.ConsumeTopics(*topic),
		kgo.ShareGroup(*group),
		kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
			for _, r := range rs {
				if r.Err != nil {
					event("F %s %d -1 %s", nowMs(), r.Partition, oneLine(r.Err))
				}
			}
		}),
	)
	if err != nil {
		die("%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(*timeoutS)*time.Second)
	defer cancel()
	type key struct {
		p int32
		o int64
	}
	distinct := make(map[key]struct{}, *n)
	deliveries, signalled := 0, false
	for len(distinct) < *n && ctx.Err() == nil {
		pctx, pcancel := context.WithTimeout(ctx, 100*time.Millisecond)
		fetches := cl.PollRecords(pctx, 500)
		pcancel()
		fetches.EachError(func(t string, p int32, e error) {
			if e != context.DeadlineExceeded && e != context.Canceled {
				event("C %s %d fetch: %s", nowMs(), p, oneLine(e))
			}
		})
		if fetches.Empty() {
			continue
		}
		t := nowMs()
		fetches.EachRecord(func(r *kgo.Record) {
			event("D %s %d %d %d", t, r.Partition, r.Offset, r.DeliveryCount())
			r.Ack(kgo.AckAccept)
			distinct[key{r.Partition, r.Offset}] = struct{}{}
			deliveries++
		})
		fctx, fcancel := context.WithTimeout(ctx, 60*time.Second)
		if err := cl.FlushAcks(fctx); err != nil {
			event("C %s -1 FlushAcks: %s", nowMs(), oneLine(err))
		}
		fcancel()
		if !signalled && *signalAt > 0 && len(distinct) >= *signalAt {
			signalled = true
			if *signalFile != "" {
				_ = os.WriteFile(*signalFile, nil, 0o644)
			}
		}
	}
	event("E %s %d %d", nowMs(), len(distinct), deliveries)
	mu.Lock()
	_ = w.Flush()
	mu.Unlock()
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	_ = cl.LeaveGroupContext(cctx)
	ccancel()
	cl.Close()
	mu.Lock()
	_ = w.Flush()
	mu.Unlock()
	_ = f.Close()
	fmt.Printf("RESULT {\"side\":\"go\",\"distinct\":%d,\"deliveries\":%d}\n", len(distinct), deliveries)
	if len(distinct) < *n {
		die("timed out with %d of %d records", len(distinct), *n)
	}
}
