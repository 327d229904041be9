// qc: the client side of the queue checker (compat-tests/queue-check/README.md).
//
// It speaks Kafka with franz-go (the version compat-tests/franz-go pins) and never judges
// anything: the workers write what they saw, each to its own log, and check.py judges the
// logs against the harness's fault events. A step that cannot be done at all exits non-zero
// with one line on stderr saying which; every network wait is bounded.
//
// Subcommands:
//
//	probe     ApiVersions: prints {"apis": {key: max version}, "features": {name: level}}
//	          as JSON, so that the harness can say what a broker does not serve.
//	setup     CreateTopics (-partitions, -replication-factor, default 1, and with
//	          -min-insync the topic config min.insync.replicas), waits until every
//	          partition has a leader (and, replicated, every replica in its ISR), then sets
//	          the share group's configs
//	          (IncrementalAlterConfigs on the GROUP resource: share.auto.offset.reset=earliest,
//	          -lock-ms, -delivery-limit) and waits until DescribeConfigs shows them.
//	produce   -records numbered records (the value is the decimal number), record n on
//	          partition n mod -partitions, idempotent and acks=all, at -rate records/s;
//	          one line "prod <n> <partition> <offset>" per acknowledged record, fsynced at
//	          the end. Exits 0 only when every record was acknowledged. -batch-bytes bounds
//	          a producer batch: share groups acquire whole batches by default (batch-optimized
//	          mode), and a producer held up by a broker restart sends its backlog in batches
//	          large enough to outlive a short acquisition lock in one worker's hands.
//	offsets   DescribeShareGroupOffsets of the group (the share-partition start offset,
//	          SPSO) and ListOffsets latest (the log end) per partition, with the group's
//	          coordinator (FindCoordinator) and each partition's leader (Metadata), as one
//	          JSON line: in a cluster the harness needs to know which node answered for what.
//	leaders   Metadata of the topic, as one JSON line {"partitions": [{"p", "leader",
//	          "epoch", "replicas", "isr"}], "coordinator": node id or -1}: which node leads
//	          each partition and which replicas are in sync, as the broker asked says
//	          (the harness's cluster mode asks the nodes it has not killed).
//	work      one share-group worker: explicit acknowledgement, one log file (-log).
//
// A worker's log, one line per event, each batch of lines fsynced before the worker goes on
// (times are wall-clock Unix nanoseconds, comparable across the processes of one machine):
//
//	start <t> <pid>
//	recv <partition> <offset> <deliveryCount> <t> <lockDeadline> <number>
//	ack-sent <partition> <offset> <t>
//	ack-ok <partition> <offset> <t>
//	ack-err <partition> <offset> <t> <error>
//	ack-unknown <partition> <offset> <t>      (the flush ended without a result for it)
//	stop <t>
//
// Per poll: the recv lines of every record returned (fsync), then the worker "works"
// (-work-ms per record, a sleep), writes ack-sent lines (fsync), marks every record
// AckAccept and calls FlushAcks, which returns once every queued acknowledgement has been
// answered and the ShareAckCallback has run for it. The callback's per-partition results
// decide each record's ack-ok or ack-err line (fsync). franz-go reports acknowledgement
// outcomes per partition, not per record, so one error for a partition marks every record of
// that partition in the flush as ack-err; FlushAcks is called after every poll so that a
// flush holds only that poll's acknowledgements.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Bounds on every wait, in one place.
const (
	pollWaitMax        = 1 * time.Second   // one PollRecords call; the loop then checks for SIGTERM
	flushAttemptMax    = 10 * time.Second  // one FlushAcks call
	flushTotalMax      = 120 * time.Second // a worker gives up (exits 3) when its acks stay unanswered this long
	requestTimeout     = 10 * time.Second  // a single admin request
	closeTimeout       = 15 * time.Second  // leaving the group at the end
	configWaitInterval = 200 * time.Millisecond
)

func die(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "qc: "+format+"\n", args...)
	os.Exit(1)
}

func now() int64 { return time.Now().UnixNano() }

type common struct {
	fs         *flag.FlagSet
	brokers    string
	topic      string
	group      string
	partitions int
	timeout    time.Duration
}

func newCommon(name string) *common {
	c := &common{fs: flag.NewFlagSet(name, flag.ExitOnError)}
	c.fs.StringVar(&c.brokers, "brokers", "127.0.0.1:9092", "bootstrap brokers, comma separated")
	c.fs.StringVar(&c.topic, "topic", "queue-check", "topic")
	c.fs.StringVar(&c.group, "group", "queue-check", "share group")
	c.fs.IntVar(&c.partitions, "partitions", 1, "partitions of the topic")
	c.fs.DurationVar(&c.timeout, "timeout", 60*time.Second, "bound on the whole subcommand")
	return c
}

func (c *common) opts(extra ...kgo.Opt) []kgo.Opt {
	return append([]kgo.Opt{
		kgo.SeedBrokers(strings.Split(c.brokers, ",")...),
		kgo.RequestTimeoutOverhead(requestTimeout),
		kgo.DialTimeout(5 * time.Second),
	}, extra...)
}

func (c *common) client(extra ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(c.opts(extra...)...)
	if err != nil {
		die("%s: new client: %v", c.fs.Name(), err)
	}
	return cl
}

func main() {
	if len(os.Args) < 2 {
		die("usage: qc probe|setup|produce|offsets|leaders|work [flags]")
	}
	cmds := map[string]func([]string){
		"probe": probe, "setup": setup, "produce": produce, "offsets": offsets, "leaders": leaders, "work": work,
	}
	f, ok := cmds[os.Args[1]]
	if !ok {
		die("unknown subcommand %q", os.Args[1])
	}
	f(os.Args[2:])
}

// ---------------------------------------------------------------- probe

func probe(args []string) {
	c := newCommon("probe")
	c.fs.Parse(args)
	cl := c.client()
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		die("probe: ApiVersions: %v", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		die("probe: ApiVersions: %v", err)
	}
	out := struct {
		Apis     map[string]int16 `json:"apis"`
		Features map[string]int16 `json:"features"`
	}{map[string]int16{}, map[string]int16{}}
	for _, k := range resp.ApiKeys {
		out.Apis[strconv.Itoa(int(k.ApiKey))] = k.MaxVersion
	}
	for _, f := range resp.FinalizedFeatures {
		out.Features[f.Name] = f.MaxVersionLevel
	}
	json.NewEncoder(os.Stdout).Encode(out)
}

// ---------------------------------------------------------------- setup

func setup(args []string) {
	c := newCommon("setup")
	lockMs := c.fs.Int("lock-ms", 0, "share.record.lock.duration.ms for the group (0: leave the broker's)")
	limit := c.fs.Int("delivery-limit", 0, "share.delivery.count.limit for the group (0: leave the broker's)")
	rf := c.fs.Int("replication-factor", 1, "the topic's replication factor")
	minISR := c.fs.Int("min-insync", 0, "the topic's min.insync.replicas (0: leave the broker's)")
	c.fs.Parse(args)
	cl := c.client()
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()

	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(requestTimeout / time.Millisecond)
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic = c.topic
	t.NumPartitions = int32(c.partitions)
	t.ReplicationFactor = int16(*rf)
	if *minISR > 0 {
		tc := kmsg.NewCreateTopicsRequestTopicConfig()
		tc.Name = "min.insync.replicas"
		tc.Value = kmsg.StringPtr(strconv.Itoa(*minISR))
		t.Configs = append(t.Configs, tc)
	}
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		die("setup: CreateTopics: %v", err)
	}
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			die("setup: CreateTopics %s: %v (%s)", rt.Topic, err, strOr(rt.ErrorMessage))
		}
	}
	for {
		mreq := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(c.topic)
		mreq.Topics = append(mreq.Topics, mt)
		mresp, err := mreq.RequestWith(ctx, cl)
		if err == nil && len(mresp.Topics) == 1 && mresp.Topics[0].ErrorCode == 0 &&
			len(mresp.Topics[0].Partitions) == c.partitions && allLed(mresp.Topics[0].Partitions, *rf) {
			break
		}
		if ctx.Err() != nil {
			die("setup: topic %s has no leader and %d replicas in sync for every partition within %v",
				c.topic, *rf, c.timeout)
		}
		time.Sleep(configWaitInterval)
	}

	want := map[string]string{"share.auto.offset.reset": "earliest"}
	if *lockMs > 0 {
		want["share.record.lock.duration.ms"] = strconv.Itoa(*lockMs)
	}
	if *limit > 0 {
		want["share.delivery.count.limit"] = strconv.Itoa(*limit)
	}
	areq := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeGroupConfig
	res.ResourceName = c.group
	for _, k := range sortedKeys(want) {
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name = k
		cfg.Op = kmsg.IncrementalAlterConfigOpSet
		cfg.Value = kmsg.StringPtr(want[k])
		res.Configs = append(res.Configs, cfg)
	}
	areq.Resources = append(areq.Resources, res)
	aresp, err := areq.RequestWith(ctx, cl)
	if err != nil {
		die("setup: IncrementalAlterConfigs (group %s): %v", c.group, err)
	}
	for _, r := range aresp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			die("setup: IncrementalAlterConfigs (group %s): %v (%s)", c.group, err, strOr(r.ErrorMessage))
		}
	}
	// A share-partition initialised before the configs land would start at the log end
	// (share.auto.offset.reset=latest), so wait until the broker shows them.
	for {
		dreq := kmsg.NewPtrDescribeConfigsRequest()
		dres := kmsg.NewDescribeConfigsRequestResource()
		dres.ResourceType = kmsg.ConfigResourceTypeGroupConfig
		dres.ResourceName = c.group
		dres.ConfigNames = sortedKeys(want)
		dreq.Resources = append(dreq.Resources, dres)
		dresp, err := dreq.RequestWith(ctx, cl)
		if err == nil && len(dresp.Resources) == 1 && dresp.Resources[0].ErrorCode == 0 {
			seen := 0
			for _, cv := range dresp.Resources[0].Configs {
				if v, ok := want[cv.Name]; ok && cv.Value != nil && *cv.Value == v {
					seen++
				}
			}
			if seen == len(want) {
				break
			}
		}
		if ctx.Err() != nil {
			die("setup: DescribeConfigs of group %s does not show %v within %v", c.group, want, c.timeout)
		}
		time.Sleep(configWaitInterval)
	}
	fmt.Printf("topic %s (%d partitions), group %s configs %v\n", c.topic, c.partitions, c.group, want)
}

// allLed: every partition has a leader and, when the topic is replicated (rf > 1), rf
// replicas, all in its ISR (so that the first leader kill finds followers in sync).
func allLed(ps []kmsg.MetadataResponseTopicPartition, rf int) bool {
	for _, p := range ps {
		if p.ErrorCode != 0 || p.Leader < 0 {
			return false
		}
		if rf > 1 && (len(p.Replicas) != rf || len(p.ISR) != rf) {
			return false
		}
	}
	return true
}

func strOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// ---------------------------------------------------------------- produce

func produce(args []string) {
	c := newCommon("produce")
	records := c.fs.Int("records", 1000, "records to produce")
	rate := c.fs.Float64("rate", 0, "records/s (0: as fast as the client goes)")
	out := c.fs.String("out", "produce.log", "acknowledged records, one line each")
	batchBytes := c.fs.Int("batch-bytes", 0, "ProducerBatchMaxBytes (0: franz-go's default)")
	c.fs.Parse(args)
	f, err := os.Create(*out)
	if err != nil {
		die("produce: %v", err)
	}
	w := bufio.NewWriter(f)
	popts := []kgo.Opt{
		kgo.DefaultProduceTopic(c.topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotence is franz-go's default; it needs acks=all
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(c.timeout),
	}
	if *batchBytes > 0 {
		popts = append(popts, kgo.ProducerBatchMaxBytes(int32(*batchBytes)))
	}
	cl := c.client(popts...)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()

	var (
		mu     sync.Mutex
		failed int
		first  error
		wg     sync.WaitGroup
	)
	// SIGTERM (the harness ending a run early) stops producing; what was sent is still waited
	// for, briefly, and logged, so that the log names every record a worker can have seen.
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	stopped := -1 // the record number at which SIGTERM came
	t0 := time.Now()
	for n := 0; n < *records; n++ {
		if *rate > 0 {
			due := t0.Add(time.Duration(float64(n) / *rate * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				select {
				case <-term:
					stopped = n
				case <-time.After(d):
				}
			}
		}
		select {
		case <-term:
			stopped = n
		default:
		}
		if stopped >= 0 {
			break
		}
		wg.Add(1)
		r := &kgo.Record{Partition: int32(n % c.partitions), Value: []byte(strconv.Itoa(n))}
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
				if first == nil {
					first = err
				}
				return
			}
			fmt.Fprintf(w, "prod %s %d %d\n", r.Value, r.Partition, r.Offset)
		})
	}
	if stopped >= 0 {
		fctx, fcancel := context.WithTimeout(context.Background(), closeTimeout)
		if cl.Flush(fctx) != nil {
			cl.Close() // fails what is left, so that every promise has run
		}
		fcancel()
	}
	wg.Wait()
	if err := w.Flush(); err != nil {
		die("produce: write %s: %v", *out, err)
	}
	if err := f.Sync(); err != nil {
		die("produce: fsync %s: %v", *out, err)
	}
	f.Close()
	if stopped >= 0 {
		die("produce: stopped by SIGTERM after %d of %d records (%d not acknowledged)", stopped, *records, failed)
	}
	if failed > 0 {
		die("produce: %d of %d records not acknowledged (first error: %v)", failed, *records, first)
	}
	fmt.Printf("produced %d records in %.1f s\n", *records, time.Since(t0).Seconds())
}

// ---------------------------------------------------------------- offsets

type partOffsets struct {
	Partition int32  `json:"p"`
	Start     int64  `json:"start"` // the share-partition start offset (SPSO), -1 when not initialised
	End       int64  `json:"end"`   // the log end offset (high watermark)
	Lag       int64  `json:"lag"`
	Leader    int32  `json:"leader"` // the partition's leader as Metadata said just before, -1 unknown
	Error     string `json:"error,omitempty"`
}

// partLeaders is one partition of the topic as Metadata answers it.
type partLeaders struct {
	Partition int32   `json:"p"`
	Leader    int32   `json:"leader"`
	Epoch     int32   `json:"epoch"`
	Replicas  []int32 `json:"replicas"`
	ISR       []int32 `json:"isr"`
	Error     string  `json:"error,omitempty"`
}

// topicLeaders asks Metadata for the topic: each partition's leader, replicas and ISR.
func topicLeaders(ctx context.Context, cl *kgo.Client, topic string) ([]partLeaders, error) {
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	mreq.Topics = append(mreq.Topics, mt)
	mresp, err := mreq.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if len(mresp.Topics) != 1 {
		return nil, fmt.Errorf("Metadata answered %d topics for one", len(mresp.Topics))
	}
	if err := kerr.ErrorForCode(mresp.Topics[0].ErrorCode); err != nil {
		return nil, err
	}
	out := []partLeaders{}
	for _, p := range mresp.Topics[0].Partitions {
		pl := partLeaders{Partition: p.Partition, Leader: p.Leader, Epoch: p.LeaderEpoch,
			Replicas: append([]int32{}, p.Replicas...), ISR: append([]int32{}, p.ISR...)}
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			pl.Error = err.Error()
		}
		out = append(out, pl)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Partition < out[j].Partition })
	return out, nil
}

// groupCoordinator asks FindCoordinator for the group: its coordinator's node id, or -1.
func groupCoordinator(ctx context.Context, cl *kgo.Client, group string) int32 {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = group
	req.CoordinatorType = 0 // a group (share groups too)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return -1
	}
	for _, c := range resp.Coordinators { // v4+
		if c.Key == group && c.ErrorCode == 0 {
			return c.NodeID
		}
	}
	if len(resp.Coordinators) == 0 && resp.ErrorCode == 0 {
		return resp.NodeID
	}
	return -1
}

func leaders(args []string) {
	c := newCommon("leaders")
	c.fs.Parse(args)
	cl := c.client()
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	parts, err := topicLeaders(ctx, cl, c.topic)
	if err != nil {
		die("leaders: Metadata %s: %v", c.topic, err)
	}
	json.NewEncoder(os.Stdout).Encode(map[string]any{"partitions": parts,
		"coordinator": groupCoordinator(ctx, cl, c.group)})
}

func offsets(args []string) {
	c := newCommon("offsets")
	c.fs.Parse(args)
	cl := c.client()
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	parts := make([]int32, c.partitions)
	res := make([]partOffsets, c.partitions)
	for i := range parts {
		parts[i] = int32(i)
		res[i] = partOffsets{Partition: int32(i), Start: -1, End: -1, Lag: -1, Leader: -1}
	}
	// Who answers for what: the coordinator answers DescribeShareGroupOffsets, and a
	// coordinator of es that does not lead a partition answers it with StartOffset -1
	// (docs/replication.md, "What fails over with a partition").
	coordinator := groupCoordinator(ctx, cl, c.group)
	if ls, err := topicLeaders(ctx, cl, c.topic); err == nil {
		for _, l := range ls {
			if l.Partition >= 0 && int(l.Partition) < c.partitions {
				res[l.Partition].Leader = l.Leader
			}
		}
	}

	dreq := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	g.GroupID = c.group
	gt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
	gt.Topic = c.topic
	gt.Partitions = parts
	g.Topics = append(g.Topics, gt)
	dreq.Groups = append(dreq.Groups, g)
	dresp, err := dreq.RequestWith(ctx, cl)
	if err != nil {
		die("offsets: DescribeShareGroupOffsets: %v", err)
	}
	for _, rg := range dresp.Groups {
		if err := kerr.ErrorForCode(rg.ErrorCode); err != nil {
			die("offsets: DescribeShareGroupOffsets group %s: %v (%s)", rg.GroupID, err, strOr(rg.ErrorMessage))
		}
		for _, rt := range rg.Topics {
			for _, rp := range rt.Partitions {
				if rp.Partition < 0 || int(rp.Partition) >= c.partitions {
					continue
				}
				o := &res[rp.Partition]
				o.Start, o.Lag = rp.StartOffset, rp.Lag
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					o.Error = err.Error()
				}
			}
		}
	}

	lreq := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = c.topic
	for _, p := range parts {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition = p
		lp.Timestamp = -1
		lt.Partitions = append(lt.Partitions, lp)
	}
	lreq.Topics = append(lreq.Topics, lt)
	lresp, err := lreq.RequestWith(ctx, cl)
	if err != nil {
		die("offsets: ListOffsets: %v", err)
	}
	for _, rt := range lresp.Topics {
		for _, rp := range rt.Partitions {
			if rp.Partition < 0 || int(rp.Partition) >= c.partitions {
				continue
			}
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				res[rp.Partition].Error = err.Error()
				continue
			}
			res[rp.Partition].End = rp.Offset
		}
	}
	json.NewEncoder(os.Stdout).Encode(map[string]any{"partitions": res, "coordinator": coordinator})
}

// ---------------------------------------------------------------- work

// wlog is a worker's log: lines are buffered and written out and fsynced by sync().
type wlog struct {
	f *os.File
	w *bufio.Writer
}

func (l *wlog) line(format string, args ...any) { fmt.Fprintf(l.w, format+"\n", args...) }

func (l *wlog) sync() {
	if err := l.w.Flush(); err != nil {
		die("work: write log: %v", err)
	}
	if err := l.f.Sync(); err != nil {
		die("work: fsync log: %v", err)
	}
}

type tp struct {
	t string
	p int32
}

// ackResults collects what the ShareAckCallback reports between two flushes.
type ackResults struct {
	mu   sync.Mutex
	errs map[tp]error
	oks  map[tp]bool
}

func (a *ackResults) take() (map[tp]error, map[tp]bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, o := a.errs, a.oks
	a.errs, a.oks = map[tp]error{}, map[tp]bool{}
	return e, o
}

func errName(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return "connection_refused" // the broker is down; the port in the message varies by run
	}
	s := strings.ReplaceAll(err.Error(), " ", "_")
	if len(s) > 120 {
		s = s[:120]
	}
	return s
}

func work(args []string) {
	c := newCommon("work")
	logPath := c.fs.String("log", "worker.log", "this worker's log")
	poll := c.fs.Int("poll", 20, "records per PollRecords at most")
	maxRecords := c.fs.Int("max-records", 0, "ShareMaxRecords (0: franz-go's default)")
	strict := c.fs.Bool("strict", false, "ShareMaxRecordsStrict (record_limit acquire mode)")
	workMs := c.fs.Float64("work-ms", 0, "simulated processing time per record, between recv and ack-sent")
	c.fs.Parse(args)

	f, err := os.OpenFile(*logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		die("work: %v", err)
	}
	l := &wlog{f: f, w: bufio.NewWriterSize(f, 1<<16)}
	l.line("start %d %d", now(), os.Getpid())
	l.sync()

	results := &ackResults{errs: map[tp]error{}, oks: map[tp]bool{}}
	opts := []kgo.Opt{
		kgo.ShareGroup(c.group),
		kgo.ConsumeTopics(c.topic),
		kgo.ClientID("queue-check-worker"),
		kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
			results.mu.Lock()
			defer results.mu.Unlock()
			for _, r := range rs {
				k := tp{r.Topic, r.Partition}
				if r.Err != nil {
					if _, seen := results.errs[k]; !seen {
						results.errs[k] = r.Err
					}
				} else {
					results.oks[k] = true
				}
			}
		}),
	}
	if *maxRecords > 0 {
		opts = append(opts, kgo.ShareMaxRecords(int32(*maxRecords)))
	}
	if *strict {
		opts = append(opts, kgo.ShareMaxRecordsStrict())
	}
	cl := c.client(opts...)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	for {
		select {
		case <-stop:
			l.line("stop %d", now())
			l.sync()
			ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
			cl.LeaveGroupContext(ctx)
			cancel()
			cl.Close()
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), pollWaitMax)
		fetches := cl.PollRecords(ctx, *poll)
		cancel()
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				fmt.Fprintf(os.Stderr, "qc work: fetch error %s/%d: %v\n", t, p, err)
			}
		})
		recs := fetches.Records()
		if len(recs) == 0 {
			continue
		}
		for _, r := range recs {
			l.line("recv %d %d %d %d %d %s", r.Partition, r.Offset, r.DeliveryCount(), now(),
				r.AcquisitionDeadline().UnixNano(), r.Value)
		}
		l.sync()
		if *workMs > 0 {
			time.Sleep(time.Duration(*workMs * float64(len(recs)) * float64(time.Millisecond)))
		}
		results.take() // nothing is in flight here (the last flush drained); start clean
		t := now()
		for _, r := range recs {
			l.line("ack-sent %d %d %d", r.Partition, r.Offset, t)
		}
		l.sync()
		cl.MarkAcks(kgo.AckAccept, recs...)
		flushed := false
		for t0 := time.Now(); time.Since(t0) < flushTotalMax; {
			fctx, fcancel := context.WithTimeout(context.Background(), flushAttemptMax)
			err := cl.FlushAcks(fctx)
			fcancel()
			if err == nil {
				flushed = true
				break
			}
			fmt.Fprintf(os.Stderr, "qc work: acknowledgements not answered after %v; waiting on\n", time.Since(t0).Round(time.Second))
		}
		if !flushed {
			// The acks' outcome stays unknown: no ack-ok or ack-err line. Exit so that the
			// harness sees a worker that gave up (it is reported) rather than mis-attributing
			// a late callback to the next poll's records.
			fmt.Fprintf(os.Stderr, "qc work: acknowledgements unanswered for %v; giving up\n", flushTotalMax)
			os.Exit(3)
		}
		errs, oks := results.take()
		t = now()
		for _, r := range recs {
			k := tp{r.Topic, r.Partition}
			switch {
			case errs[k] != nil:
				l.line("ack-err %d %d %d %s", r.Partition, r.Offset, t, errName(errs[k]))
			case oks[k]:
				l.line("ack-ok %d %d %d", r.Partition, r.Offset, t)
			default: // the flush ended with no result for this partition: outcome unknown
				l.line("ack-unknown %d %d %d", r.Partition, r.Offset, t)
			}
		}
		l.sync()
	}
}
