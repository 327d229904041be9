// cluster-clients-franz: the franz-go part of scripts/cluster-clients. Against a
// running cluster it creates a topic (CreateTopics), produces -records records
// with acks=all, reads them all back through a consumer group, and prints what
// the checker needs, one JSON object per line:
//
//	{"leaders": {"0": 1, ...}, "brokers": [1, 2, 3]}    from Metadata
//	{"end_offsets": {"0": 497, ...}}                   from ListOffsets (latest)
//	{"consumed": [[partition, offset, "value"], ...]}  every record the group read
//
// The checker (scripts/cluster-clients) decides pass or fail; this program
// exits non-zero only when a step cannot be done at all, saying which.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func die(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "cluster-clients-franz: "+format+"\n", args...)
	os.Exit(1)
}

func emit(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		die("encoding output: %v", err)
	}
	fmt.Println(string(b))
}

func main() {
	brokers := flag.String("brokers", "127.0.0.1:9092", "bootstrap list")
	topic := flag.String("topic", "", "topic to create")
	partitions := flag.Int("partitions", 6, "partitions of the topic")
	records := flag.Int("records", 3000, "records to produce")
	group := flag.String("group", "", "consumer group")
	timeout := flag.Duration("timeout", 90*time.Second, "bound on the whole run")
	flag.Parse()
	if *topic == "" || *group == "" {
		die("-topic and -group are required")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	seeds := strings.Split(*brokers, ",")

	admin, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		die("client: %v", err)
	}
	defer admin.Close()

	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic = *topic
	ct.NumPartitions = int32(*partitions)
	ct.ReplicationFactor = 1
	create.Topics = append(create.Topics, ct)
	create.TimeoutMillis = 30000
	cresp, err := create.RequestWith(ctx, admin)
	if err != nil {
		die("CreateTopics: %v", err)
	}
	for _, t := range cresp.Topics {
		if t.ErrorCode != 0 {
			die("CreateTopics %s: error code %d (%v)", t.Topic, t.ErrorCode, t.ErrorMessage)
		}
	}

	// Metadata until every partition has a leader (the creation is applied on
	// every node shortly after the controller answers). Bounded by ctx.
	leaders := map[string]int32{}
	var nodes []int32
	for {
		md := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(*topic)
		md.Topics = append(md.Topics, mt)
		mresp, err := md.RequestWith(ctx, admin)
		if err != nil {
			die("Metadata: %v", err)
		}
		nodes = nodes[:0]
		for _, b := range mresp.Brokers {
			nodes = append(nodes, b.NodeID)
		}
		clear(leaders)
		for _, t := range mresp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == 0 && p.Leader >= 0 {
					leaders[fmt.Sprint(p.Partition)] = p.Leader
				}
			}
		}
		if len(leaders) == *partitions {
			break
		}
		select {
		case <-ctx.Done():
			die("Metadata: %d of %d partitions have a leader before the deadline", len(leaders), *partitions)
		case <-time.After(100 * time.Millisecond):
		}
	}
	emit(map[string]any{"leaders": leaders, "brokers": nodes})

	producer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DefaultProduceTopic(*topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		die("producer: %v", err)
	}
	batch := make([]*kgo.Record, 0, *records)
	for i := 0; i < *records; i++ {
		batch = append(batch, kgo.StringRecord(fmt.Sprintf("franz-%d", i)))
	}
	if err := producer.ProduceSync(ctx, batch...).FirstErr(); err != nil {
		die("produce (acks=all): %v", err)
	}
	producer.Close()

	lo := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = *topic
	for p := 0; p < *partitions; p++ {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition = int32(p)
		lp.Timestamp = -1 // latest
		lt.Partitions = append(lt.Partitions, lp)
	}
	lo.Topics = append(lo.Topics, lt)
	lresp, err := lo.RequestWith(ctx, admin)
	if err != nil {
		die("ListOffsets: %v", err)
	}
	ends := map[string]int64{}
	for _, t := range lresp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				die("ListOffsets partition %d: error code %d", p.Partition, p.ErrorCode)
			}
			ends[fmt.Sprint(p.Partition)] = p.Offset
		}
	}
	emit(map[string]any{"end_offsets": ends})

	// Read through a consumer group until every partition's position reaches
	// its end offset: everything in the log is read, nothing is waited for.
	consumer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumerGroup(*group),
		kgo.ConsumeTopics(*topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		die("consumer: %v", err)
	}
	defer consumer.Close()
	consumed := [][]any{}
	next := map[string]int64{}
	done := func() bool {
		for p, end := range ends {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	for !done() {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			die("consumed %d records before the deadline; positions %v, ends %v", len(consumed), next, ends)
		}
		fetches.EachError(func(t string, p int32, err error) {
			die("fetch %s[%d]: %v", t, p, err)
		})
		fetches.EachRecord(func(r *kgo.Record) {
			consumed = append(consumed, []any{r.Partition, r.Offset, string(r.Value)})
			next[fmt.Sprint(r.Partition)] = r.Offset + 1
		})
	}
	emit(map[string]any{"consumed": consumed})
}
