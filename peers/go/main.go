// The franz-go peer of scripts/bench peers: a share consumer on github.com/twmb/franz-go/pkg/kgo
// (kgo.ShareGroup), measured as bench/src/peers.rs is.
//
//	go build -o ../../target/bench-peers/bin/franz-go-bench .   (scripts/bench peers does it)
//	franz-go-bench consume --bootstrap B --topic T --group G --records N
//	    [--mode implicit|explicit] [--timeout-s 300]
//	franz-go-bench failover --bootstrap B --topic T --group G --records N --events FILE
//	    [--signal-at 20000 --signal-file FILE] [--timeout-s 180]   (failover.go)
//	franz-go-bench latency --bootstrap B --topic T --group G --records N
//	    [--warmup-ms 5000] [--timeout-s 120]   (latency.go)
//
// Times from just before the client is created (it subscribes on creation) until FlushAcks
// confirms the last acknowledgement; prints RESULT {json}.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func die(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "franz-go bench: error: "+format+"\n", a...)
	os.Exit(1)
}

func main() {
	if len(os.Args) >= 2 && os.Args[1] == "failover" {
		failover(os.Args[2:])
		return
	}
	if len(os.Args) >= 2 && os.Args[1] == "latency" {
		latency(os.Args[2:])
		return
	}
	if len(os.Args) < 2 || os.Args[1] != "consume" {
		die("usage: share-bench consume --bootstrap B --topic T --group G --records N [--mode implicit|explicit]")
	}
	fs := flag.NewFlagSet("consume", flag.ExitOnError)
	bootstrap := fs.String("bootstrap", "", "bootstrap servers")
	topic := fs.String("topic", "", "topic")
	group := fs.String("group", "", "share group")
	n := fs.Int64("records", 0, "records to consume")
	mode := fs.String("mode", "implicit", "implicit or explicit")
	timeoutS := fs.Int("timeout-s", 300, "give up after this many seconds")
	_ = fs.Parse(os.Args[2:])
	explicit := false
	switch *mode {
	case "implicit":
	case "explicit":
		explicit = true
	default:
		die("--mode %q: use implicit or explicit", *mode)
	}

	var ackErr error
	start := time.Now()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(*bootstrap, ",")...),
		kgo.ClientID("franz-go-bench"),
		kgo.ConsumeTopics(*topic),
		kgo.ShareGroup(*group),
		kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
			if e := rs.Error(); e != nil && ackErr == nil {
				ackErr = e
			}
		}),
	)
	if err != nil {
		die("%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(*timeoutS)*time.Second)
	defer cancel()
	var got, bytes int64
	var first time.Duration
	for got < *n && ctx.Err() == nil {
		pctx, pcancel := context.WithTimeout(ctx, 100*time.Millisecond)
		fetches := cl.PollRecords(pctx, 500)
		pcancel()
		fetches.EachError(func(t string, p int32, e error) {
			if e != context.DeadlineExceeded && e != context.Canceled {
				die("fetch %s-%d: %v", t, p, e)
			}
		})
		if first == 0 && !fetches.Empty() {
			first = time.Since(start)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			bytes += int64(len(r.Key) + len(r.Value))
			if explicit {
				r.Ack(kgo.AckAccept)
			}
			got++
		})
	}
	// Implicit mode: accept the last poll's records, then wait for every ack to be answered.
	cl.MarkAcks(kgo.AckAccept)
	fctx, fcancel := context.WithTimeout(context.Background(), 30*time.Second)
	if err := cl.FlushAcks(fctx); err != nil {
		die("FlushAcks: %v", err)
	}
	fcancel()
	elapsed := time.Since(start).Seconds()
	fmt.Printf("RESULT {\"records\":%d,\"bytes\":%d,\"elapsed_s\":%.4f,\"first_s\":%.4f}\n", got, bytes, elapsed, first.Seconds())
	cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = cl.LeaveGroupContext(cctx)
	ccancel()
	cl.Close()
	if ackErr != nil {
		die("acknowledgement failed: %v", ackErr)
	}
	if got < *n {
		die("timed out with %d of %d records", got, *n)
	}
}
