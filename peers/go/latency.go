// The franz-go side of scripts/bench peers' latency test: the loop of bench/src/peers.rs
// latency on kgo.ShareGroup. Print READY once the client is created (it joins on creation),
// then poll (500 ms), Ack(AckAccept) every record, and take each record's latency as the wall
// clock when its poll returned minus its timestamp (set by the producer at send, same
// machine), over the records produced --warmup-ms after the first one. Prints
// LATENCY {"records","measured","p50_ms","p99_ms","max_ms"} as ours and Java's do.
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func latency(argv []string) {
	fs := flag.NewFlagSet("latency", flag.ExitOnError)
	bootstrap := fs.String("bootstrap", "", "bootstrap servers")
	topic := fs.String("topic", "", "topic")
	group := fs.String("group", "", "share group")
	n := fs.Int64("records", 0, "records to consume")
	warmup := fs.Int64("warmup-ms", 5000, "records produced this long after the first are not measured")
	timeoutS := fs.Int("timeout-s", 120, "give up after this many seconds")
	_ = fs.Parse(argv)

	cl, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(*bootstrap, ",")...),
		kgo.ClientID("franz-go-latency-bench"),
		kgo.ConsumeTopics(*topic),
		kgo.ShareGroup(*group),
	)
	if err != nil {
		die("%v", err)
	}
	fmt.Println("READY")
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(*timeoutS)*time.Second)
	defer cancel()
	lat := make([]int64, 0, *n)
	var got int64
	first := int64(math.MinInt64)
	for got < *n && ctx.Err() == nil {
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fetches := cl.PollRecords(pctx, 500)
		pcancel()
		now := time.Now().UnixMilli()
		fetches.EachError(func(t string, p int32, e error) {
			if e != context.DeadlineExceeded && e != context.Canceled {
				die("fetch %s-%d: %v", t, p, e)
			}
		})
		fetches.EachRecord(func(r *kgo.Record) {
			ts := r.Timestamp.UnixMilli()
			if first == math.MinInt64 {
				first = ts
			}
			if ts >= first+*warmup {
				lat = append(lat, now-ts)
			}
			r.Ack(kgo.AckAccept)
			got++
		})
	}
	fctx, fcancel := context.WithTimeout(context.Background(), 10*time.Second)
	_ = cl.FlushAcks(fctx)
	fcancel()
	cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = cl.LeaveGroupContext(cctx)
	ccancel()
	cl.Close()

	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) int64 {
		i := int(math.Ceil(float64(len(lat))*p)) - 1
		if i < 0 || i >= len(lat) {
			return -1
		}
		return lat[i]
	}
	maxMs := int64(-1)
	if len(lat) > 0 {
		maxMs = lat[len(lat)-1]
	}
	fmt.Printf("LATENCY {\"records\":%d,\"measured\":%d,\"p50_ms\":%d,\"p99_ms\":%d,\"max_ms\":%d}\n",
		got, len(lat), pct(0.50), pct(0.99), maxMs)
	if got < *n {
		fmt.Fprintf(os.Stderr, "franz-go bench: error: timed out with %d of %d records\n", got, *n)
		os.Exit(1)
	}
}
