// faults-driver: the client side of the fault-injection checker (docs/faults.md).
//
// It talks Kafka to a three-node cluster (es or Apache Kafka) with franz-go and
// writes a history, one JSON object per line, that check.py judges. It never
// judges anything itself: a step that cannot be done at all exits non-zero
// saying which, everything else (errors included) goes into the history.
//
// Subcommands (all bounded by -timeout or -seconds):
//
//	create    CreateTopics (partitions, replication factor, min.insync.replicas),
//	          then Metadata until every partition has a leader.
//	leader    print the node id leading one partition (-1: none), from Metadata.
//	healthy   wait until Metadata lists -nodes brokers and every partition of the
//	          topic has a leader with at least -min-isr replicas in sync.
//	workload  -producers idempotent acks=all producers, each value unique
//	          ("p<producer>-<counter>"), one assign consumer per partition and
//	          isolation level, and with -txn a transactional producer that aborts
//	          some transactions; runs for -seconds (or until SIGUSR1, for a runner
//	          that decides the end itself: scripts/soak-kill9), then flushes (bounded).
//	final     after the nemesis has healed: writes one acks=all sentinel record
//	          per partition, then reads every partition from the start, once
//	          read_uncommitted and once read_committed, until the sentinel.
//
// History events ("t" is milliseconds since the process started, "type" below):
//
//	meta      {topic, partitions, producers, txn, seconds}
//	invoke    {proc, value, partition}            a send is handed to the client
//	ack       {proc, value, partition, offset}    acks=all acknowledged it
//	fail      {proc, value, partition, error}     the client gave up on it: outcome unknown
//	txn       {txn, values, intent, ok, error}    intent commit|abort; ok: EndTxn answered NONE
//	poll      {consumer, iso, records: [[p, o, v]...]}
//	cerror    {consumer, iso, error}              a fetch error handed to the application
//	leaders   {leaders: {p: leader}, isr: {p: n}, error}   Metadata every 500 ms, when it changed
//	final     {iso, partition, sentinel, records: [[o, v]...], complete, error}
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var start = time.Now()

func die(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "faults-driver: "+format+"\n", args...)
	os.Exit(1)
}

// history serialises events from every goroutine into one file.
type history struct {
	mu  sync.Mutex
	f   *os.File
	enc *json.Encoder
}

func openHistory(path string) *history {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		die("history %s: %v", path, err)
	}
	return &history{f: f, enc: json.NewEncoder(f)}
}

func (h *history) emit(kind string, fields map[string]any) {
	fields["type"] = kind
	fields["t"] = time.Since(start).Milliseconds()
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.enc.Encode(fields); err != nil {
		die("writing history: %v", err)
	}
}

func (h *history) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.f.Sync(); err != nil {
		die("syncing history: %v", err)
	}
	if err := h.f.Close(); err != nil {
		die("closing history: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

type common struct {
	brokers   []string
	topic     string
	timeout   time.Duration
	histPath  string
	parts     int
	fs        *flag.FlagSet
	brokersIn *string
}

func newCommon(name string) *common {
	c := &common{fs: flag.NewFlagSet(name, flag.ExitOnError)}
	c.brokersIn = c.fs.String("brokers", "", "bootstrap list host:port,...")
	c.fs.StringVar(&c.topic, "topic", "", "topic")
	c.fs.DurationVar(&c.timeout, "timeout", 90*time.Second, "bound on this step")
	c.fs.StringVar(&c.histPath, "history", "", "history file (JSON lines, appended)")
	c.fs.IntVar(&c.parts, "partitions", 3, "partitions of the topic")
	return c
}

func (c *common) parse(args []string) {
	if err := c.fs.Parse(args); err != nil {
		die("%v", err)
	}
	if *c.brokersIn == "" || c.topic == "" {
		die("-brokers and -topic are required")
	}
	c.brokers = strings.Split(*c.brokersIn, ",")
}

// baseOpts: quick reconnects and metadata refreshes, because nodes come and go.
// connect parses the command's flags and opens a client, with a context
// bounded by the command's timeout.
func (c *common) connect(args []string) (*kgo.Client, context.Context, context.CancelFunc) {
	c.parse(args)
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	cl, err := kgo.NewClient(c.baseOpts()...)
	if err != nil {
		cancel()
		die("client: %v", err)
	}
	return cl, ctx, cancel
}

func (c *common) baseOpts() []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(c.brokers...),
		kgo.DialTimeout(3 * time.Second),
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.MetadataMaxAge(5 * time.Second),
		kgo.RetryTimeout(20 * time.Second),
	}
}

func main() {
	if len(os.Args) < 2 {
		die("usage: faults-driver create|leader|healthy|workload|final [flags]")
	}
	cmd, args := os.Args[1], os.Args[2:]
	switch cmd {
	case "create":
		create(args)
	case "leader":
		leader(args)
	case "healthy":
		healthy(args)
	case "workload":
		workload(args)
	case "final":
		final(args)
	default:
		die("unknown subcommand %q", cmd)
	}
}

// partitionState is one partition as Metadata describes it.
type partitionState struct {
	leader int32
	isr    int
	err    int16
}

func metadata(ctx context.Context, cl *kgo.Client, topic string) (brokers []int32, parts map[int32]partitionState, err error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = false
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, nil, err
	}
	for _, b := range resp.Brokers {
		brokers = append(brokers, b.NodeID)
	}
	parts = map[int32]partitionState{}
	for _, t := range resp.Topics {
		if t.ErrorCode != 0 {
			return brokers, nil, kerr.ErrorForCode(t.ErrorCode)
		}
		for _, p := range t.Partitions {
			parts[p.Partition] = partitionState{leader: p.Leader, isr: len(p.ISR), err: p.ErrorCode}
		}
	}
	return brokers, parts, nil
}

func create(args []string) {
	c := newCommon("create")
	rf := c.fs.Int("rf", 3, "replication factor")
	minISR := c.fs.Int("min-isr", 2, "min.insync.replicas")
	cl, ctx, cancel := c.connect(args)
	defer cancel()
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic = c.topic
	t.NumPartitions = int32(c.parts)
	t.ReplicationFactor = int16(*rf)
	cfg := kmsg.NewCreateTopicsRequestTopicConfig()
	cfg.Name = "min.insync.replicas"
	cfg.Value = kmsg.StringPtr(strconv.Itoa(*minISR))
	t.Configs = append(t.Configs, cfg)
	req.Topics = append(req.Topics, t)
	req.TimeoutMillis = 30000
	// CreateTopics is retried while the cluster is still settling (no
	// controller yet, brokers not all registered: INVALID_REPLICATION_FACTOR for
	// up to 10 s); any other error is final. The last answer is what a failure
	// reports, not the deadline.
	settle := time.Now().Add(10 * time.Second)
	var last string
	for {
		resp, err := req.RequestWith(ctx, cl)
		switch {
		case err != nil:
			if last == "" || ctx.Err() == nil {
				last = err.Error()
			}
		case len(resp.Topics) != 1:
			last = fmt.Sprintf("%d topics in the answer", len(resp.Topics))
		default:
			code := resp.Topics[0].ErrorCode
			if code == 0 || code == kerr.TopicAlreadyExists.Code {
				goto created
			}
			e := kerr.ErrorForCode(code)
			last = e.Error()
			if m := resp.Topics[0].ErrorMessage; m != nil {
				last += ": " + *m
			}
			retry := kerr.IsRetriable(e) || (code == kerr.InvalidReplicationFactor.Code && time.Now().Before(settle))
			if !retry {
				die("CreateTopics %s (rf %d, min.insync.replicas %d): %s", c.topic, *rf, *minISR, last)
			}
		}
		if ctx.Err() != nil {
			die("CreateTopics %s (rf %d, min.insync.replicas %d): %s (gave up after %v)", c.topic, *rf, *minISR, last, c.timeout)
		}
		time.Sleep(500 * time.Millisecond)
	}
created:
	for {
		_, parts, err := metadata(ctx, cl, c.topic)
		ok := err == nil && len(parts) == c.parts
		for _, p := range parts {
			ok = ok && p.leader >= 0
		}
		if ok {
			fmt.Printf("created %s: %d partitions, rf %d, min.insync.replicas %d\n", c.topic, c.parts, *rf, *minISR)
			return
		}
		if ctx.Err() != nil {
			die("topic %s created but not every partition has a leader after %v (%v)", c.topic, c.timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func leader(args []string) {
	c := newCommon("leader")
	part := c.fs.Int("partition", 0, "partition")
	cl, ctx, cancel := c.connect(args)
	defer cancel()
	defer cl.Close()
	_, parts, err := metadata(ctx, cl, c.topic)
	if err != nil {
		die("Metadata: %v", err)
	}
	p, ok := parts[int32(*part)]
	if !ok {
		fmt.Println(-1)
		return
	}
	fmt.Println(p.leader)
}

func healthy(args []string) {
	c := newCommon("healthy")
	nodes := c.fs.Int("nodes", 3, "brokers Metadata must list")
	minISR := c.fs.Int("min-isr", 1, "in-sync replicas every partition must have")
	cl, ctx, cancel := c.connect(args)
	defer cancel()
	defer cl.Close()
	var why string
	for {
		brokers, parts, err := metadata(ctx, cl, c.topic)
		switch {
		case err != nil:
			why = fmt.Sprintf("Metadata: %v", err)
		case len(brokers) < *nodes:
			why = fmt.Sprintf("Metadata lists brokers %v, want %d", brokers, *nodes)
		case len(parts) != c.parts:
			why = fmt.Sprintf("%d partitions, want %d", len(parts), c.parts)
		default:
			why = ""
			for id, p := range parts {
				if p.leader < 0 || p.isr < *minISR {
					why = fmt.Sprintf("partition %d: leader %d, %d in sync", id, p.leader, p.isr)
					break
				}
			}
		}
		if why == "" {
			fmt.Println("healthy")
			return
		}
		if ctx.Err() != nil {
			die("not healthy after %v: %s", c.timeout, why)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// promises counts sends whose outcome is still to come, so that the history is
// complete before the process exits.
type promises struct{ wg sync.WaitGroup }

func workload(args []string) {
	c := newCommon("workload")
	seconds := c.fs.Duration("seconds", 60*time.Second, "how long producers write")
	nprod := c.fs.Int("producers", 3, "idempotent producers")
	rate := c.fs.Float64("rate", 40, "records per second per producer")
	txn := c.fs.Bool("txn", true, "also run a transactional producer that aborts some transactions")
	flushFor := c.fs.Duration("flush", 45*time.Second, "bound on waiting for outstanding sends after -seconds")
	delivery := c.fs.Duration("delivery-timeout", 30*time.Second, "franz-go RecordDeliveryTimeout (delivery.timeout.ms)")
	seed := c.fs.Int64("seed", time.Now().UnixNano(), "random seed (partition choice, aborts)")
	acks := c.fs.String("acks", "all", "all (idempotent, acks=all) or leader (acks=1, not idempotent: a negative control that may lose acknowledged records)")
	c.parse(args)
	if *acks != "all" && *acks != "leader" {
		die("-acks must be all or leader")
	}
	if c.histPath == "" {
		die("-history is required")
	}
	h := openHistory(c.histPath)
	h.emit("meta", map[string]any{"topic": c.topic, "partitions": c.parts, "producers": *nprod,
		"txn": *txn, "seconds": seconds.Seconds(), "rate": *rate, "seed": *seed, "acks": *acks})

	// Producing stops -seconds after every producer has had its first send
	// answered and the transactional producer its first transaction (the warm-up:
	// producer ids, the transaction coordinator and __transaction_state exist before
	// any fault). The driver then creates the file <history>.warm, from which the
	// runner times the nemesis.
	produceCtx, stopProducing := context.WithCancel(context.Background())
	defer stopProducing()
	// SIGUSR1 ends the producing time early, as if -seconds had elapsed.
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	go func() {
		select {
		case <-usr1:
			stopProducing()
		case <-produceCtx.Done():
		}
	}()
	var warm sync.WaitGroup
	consumeCtx, stopConsuming := context.WithCancel(context.Background())
	defer stopConsuming()

	var cwg sync.WaitGroup
	for p := 0; p < c.parts; p++ {
		for _, iso := range []string{"ru", "rc"} {
			cwg.Add(1)
			go func(p int32, iso string) {
				defer cwg.Done()
				consume(consumeCtx, c, h, p, iso)
			}(int32(p), iso)
		}
	}

	cwg.Add(1)
	go func() {
		defer cwg.Done()
		watchLeaders(consumeCtx, c, h)
	}()

	var pwg sync.WaitGroup
	var acked, failed atomic.Int64
	for i := 0; i < *nprod; i++ {
		pwg.Add(1)
		warm.Add(1)
		go func(id int) {
			defer pwg.Done()
			produce(produceCtx, c, h, id, *rate, *flushFor, *delivery, *acks, &acked, &failed, warm.Done)
		}(i)
	}
	if *txn {
		pwg.Add(1)
		warm.Add(1)
		go func() {
			defer pwg.Done()
			transact(produceCtx, c, h, rand.New(rand.NewSource(*seed)), *delivery, warm.Done)
		}()
	}
	warmed := make(chan struct{})
	go func() { warm.Wait(); close(warmed) }()
	select {
	case <-warmed:
	case <-time.After(60 * time.Second):
		h.emit("warm-up", map[string]any{"complete": false})
	}
	if err := os.WriteFile(c.histPath+".warm", nil, 0o644); err != nil {
		die("warm-up marker: %v", err)
	}
	time.AfterFunc(*seconds, stopProducing)
	pwg.Wait()
	// Consumers keep reading a little after the last outcome so that they see
	// the tail; the final read (after healing) is what the checker relies on.
	tail := time.NewTimer(3 * time.Second)
	<-tail.C
	stopConsuming()
	cwg.Wait()
	h.close()
	fmt.Printf("workload done: %d acknowledged, %d failed or unknown\n", acked.Load(), failed.Load())
}

func produce(ctx context.Context, c *common, h *history, id int, rate float64, flushFor, delivery time.Duration, acks string, acked, failed *atomic.Int64, warmed func()) {
	proc := fmt.Sprintf("p%d", id)
	opts := append(c.baseOpts(),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(delivery),
		kgo.ProducerLinger(0),
		kgo.MaxBufferedRecords(2000),
	)
	if acks == "leader" {
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		die("producer client: %v", err)
	}
	var p promises
	interval := time.Duration(float64(time.Second) / rate)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	n := 0
	first := make(chan struct{})
	var once sync.Once
	for {
		if n == 1 {
			<-first // the warm-up: the first send is answered before the second
			warmed()
		}
		if n > 0 {
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
			if ctx.Err() != nil {
				break
			}
		}
		value := fmt.Sprintf("%s-%d", proc, n)
		part := int32((n + id) % c.parts)
		n++
		h.emit("invoke", map[string]any{"proc": proc, "value": value, "partition": part})
		p.wg.Add(1)
		// The send's own context is not ctx: a send already handed over keeps
		// its chance to complete after the producing time is up.
		cl.Produce(context.Background(), &kgo.Record{Topic: c.topic, Partition: part, Value: []byte(value)},
			func(r *kgo.Record, err error) {
				defer p.wg.Done()
				defer once.Do(func() { close(first) })
				if err != nil {
					failed.Add(1)
					h.emit("fail", map[string]any{"proc": proc, "value": value, "partition": part, "error": errString(err)})
					return
				}
				acked.Add(1)
				h.emit("ack", map[string]any{"proc": proc, "value": value, "partition": r.Partition, "offset": r.Offset})
			})
	}
	fctx, cancel := context.WithTimeout(context.Background(), flushFor)
	defer cancel()
	_ = cl.Flush(fctx) // what is still outstanding is failed by Close below
	cl.Close()
	p.wg.Wait()
}

// transact runs transactions of a few records each until ctx ends; about one
// in three is aborted on purpose, and any transaction that saw an error is
// aborted. "intent" is what was asked of EndTxn: a transaction whose commit
// was never asked for must never be visible to a read_committed consumer.
func transact(ctx context.Context, c *common, h *history, rng *rand.Rand, delivery time.Duration, warmed func()) {
	txnID := "faults-txn-" + c.topic
	newClient := func() *kgo.Client {
		opts := append(c.baseOpts(),
			kgo.TransactionalID(txnID),
			kgo.TransactionTimeout(10*time.Second),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RecordDeliveryTimeout(delivery),
			kgo.ProducerLinger(0),
		)
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			die("transactional client: %v", err)
		}
		return cl
	}
	cl := newClient()
	defer func() { cl.Close() }()
	const perTxn = 4
	var once sync.Once
	defer once.Do(warmed)
	for k := 0; k == 0 || ctx.Err() == nil; k++ {
		if k > 0 {
			once.Do(warmed) // the first transaction has ended, however it ended
			time.Sleep(150 * time.Millisecond)
		}
		values := make([]string, 0, perTxn)
		if err := cl.BeginTransaction(); err != nil {
			h.emit("txn", map[string]any{"txn": k, "values": values, "intent": "abort", "ok": false, "error": "begin: " + err.Error()})
			cl.Close()
			cl = newClient()
			continue
		}
		var mu sync.Mutex
		var produceErr error
		var wg sync.WaitGroup
		for i := 0; i < perTxn; i++ {
			value := fmt.Sprintf("t%d-%d", k, i)
			part := int32(rng.Intn(c.parts))
			values = append(values, value)
			h.emit("invoke", map[string]any{"proc": "txn", "value": value, "partition": part, "txn": k})
			wg.Add(1)
			cl.Produce(context.Background(), &kgo.Record{Topic: c.topic, Partition: part, Value: []byte(value)},
				func(r *kgo.Record, err error) {
					defer wg.Done()
					if err != nil {
						mu.Lock()
						produceErr = err
						mu.Unlock()
						h.emit("fail", map[string]any{"proc": "txn", "value": value, "partition": part, "txn": k, "error": errString(err)})
						return
					}
					h.emit("ack", map[string]any{"proc": "txn", "value": value, "partition": r.Partition, "offset": r.Offset, "txn": k})
				})
		}
		fctx, cancel := context.WithTimeout(context.Background(), delivery+5*time.Second)
		flushErr := cl.Flush(fctx)
		cancel()
		wg.Wait()
		intent := kgo.TryCommit
		if produceErr != nil || flushErr != nil || rng.Intn(3) == 0 {
			intent = kgo.TryAbort
		}
		name := map[kgo.TransactionEndTry]string{kgo.TryCommit: "commit", kgo.TryAbort: "abort"}[intent]
		ectx, ecancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := cl.EndTransaction(ectx, intent)
		ecancel()
		h.emit("txn", map[string]any{"txn": k, "values": values, "intent": name, "ok": err == nil, "error": errString(err)})
		if err != nil {
			// An unconfirmed end is retried as an abort (franz-go's documented
			// recovery); if that fails too, a new client re-initialises the
			// transactional id, which fences and aborts whatever is open.
			actx, acancel := context.WithTimeout(context.Background(), 30*time.Second)
			aerr := cl.EndTransaction(actx, kgo.TryAbort)
			acancel()
			if aerr != nil {
				cl.Close()
				cl = newClient()
			}
		}
	}
}

// watchLeaders records each partition's leader and in-sync count whenever a
// Metadata answer differs from the last one: the history then shows what the
// faults did (elections, partitions without a leader).
func watchLeaders(ctx context.Context, c *common, h *history) {
	cl, err := kgo.NewClient(c.baseOpts()...)
	if err != nil {
		die("metadata client: %v", err)
	}
	defer cl.Close()
	last := ""
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, parts, err := metadata(rctx, cl, c.topic)
		cancel()
		if ctx.Err() != nil {
			return
		}
		leaders, isr := map[string]int32{}, map[string]int{}
		for p, st := range parts {
			leaders[strconv.Itoa(int(p))] = st.leader
			isr[strconv.Itoa(int(p))] = st.isr
		}
		key := fmt.Sprint(leaders, isr, err != nil)
		if key != last {
			last = key
			h.emit("leaders", map[string]any{"leaders": leaders, "isr": isr, "error": errString(err)})
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func consume(ctx context.Context, c *common, h *history, p int32, iso string) {
	name := fmt.Sprintf("c%d-%s", p, iso)
	level := kgo.ReadUncommitted()
	if iso == "rc" {
		level = kgo.ReadCommitted()
	}
	opts := append(c.baseOpts(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{c.topic: {p: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(level),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		die("consumer client: %v", err)
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(t string, part int32, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			h.emit("cerror", map[string]any{"consumer": name, "iso": iso, "partition": part, "error": errString(err)})
		})
		var recs [][]any
		fs.EachRecord(func(r *kgo.Record) {
			recs = append(recs, []any{r.Partition, r.Offset, string(r.Value)})
		})
		if len(recs) > 0 {
			h.emit("poll", map[string]any{"consumer": name, "iso": iso, "records": recs})
		}
	}
}

// final writes a sentinel per partition and reads each partition from the start
// until the sentinel, under both isolation levels. Every send acknowledged before
// the sentinel's lies below it; with read_committed, the sentinel is visible only
// once every transaction before it has ended, so reaching it means the reader
// has been offered every committed record before it.
func final(args []string) {
	c := newCommon("final")
	c.parse(args)
	if c.histPath == "" {
		die("-history is required")
	}
	h := openHistory(c.histPath)
	defer h.close()
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()

	pcl, err := kgo.NewClient(append(c.baseOpts(),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(c.timeout/2),
	)...)
	if err != nil {
		die("sentinel client: %v", err)
	}
	sentinels := map[int32]int64{}
	for p := 0; p < c.parts; p++ {
		value := fmt.Sprintf("final-%d", p)
		h.emit("invoke", map[string]any{"proc": "final", "value": value, "partition": p})
		r, err := pcl.ProduceSync(ctx, &kgo.Record{Topic: c.topic, Partition: int32(p), Value: []byte(value)}).First()
		if err != nil {
			h.emit("fail", map[string]any{"proc": "final", "value": value, "partition": p, "error": errString(err)})
			pcl.Close()
			die("sentinel for partition %d: %v", p, err)
		}
		h.emit("ack", map[string]any{"proc": "final", "value": value, "partition": r.Partition, "offset": r.Offset})
		sentinels[int32(p)] = r.Offset
	}
	pcl.Close()

	incomplete := 0
	for _, iso := range []string{"ru", "rc"} {
		for p := int32(0); p < int32(c.parts); p++ {
			if !finalRead(ctx, c, h, iso, p, sentinels[p]) {
				incomplete++
			}
		}
	}
	if incomplete > 0 {
		fmt.Printf("final read: %d partition reads did not reach their sentinel\n", incomplete)
		return
	}
	fmt.Println("final read complete")
}

func finalRead(ctx context.Context, c *common, h *history, iso string, p int32, sentinel int64) bool {
	level := kgo.ReadUncommitted()
	if iso == "rc" {
		level = kgo.ReadCommitted()
	}
	cl, err := kgo.NewClient(append(c.baseOpts(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{c.topic: {p: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(level),
		kgo.FetchMaxWait(500*time.Millisecond),
	)...)
	if err != nil {
		die("final client: %v", err)
	}
	defer cl.Close()
	var recs [][]any
	var errs []string
	for {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(_ string, _ int32, err error) {
			if len(errs) < 20 {
				errs = append(errs, errString(err))
			}
		})
		reached := false
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset <= sentinel {
				recs = append(recs, []any{r.Offset, string(r.Value)})
			}
			reached = reached || r.Offset >= sentinel
		})
		if reached || ctx.Err() != nil {
			h.emit("final", map[string]any{"iso": iso, "partition": p, "sentinel": sentinel,
				"records": recs, "complete": reached, "errors": errs})
			return reached
		}
	}
}
