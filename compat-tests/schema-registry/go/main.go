// Command srgo drives a Confluent-compatible schema registry with two Go client libraries, as
// their users do: franz-go's pkg/sr (client and Serde, records through franz-go's kgo) and
// confluent-kafka-go's schemaregistry package with its Avro, JSON Schema and Protobuf serdes
// (records through its librdkafka producer and consumer). It is built by
// compat-tests/schema-registry/prepare and run by compat-tests/schema-registry/run.
//
//	srgo scenarios --registry URL --bootstrap HOST:PORT --out FILE [--quick] [--only PREFIX,...]
//	srgo bench --registry URL --op register|lookup|get-by-id --concurrency N --requests N
//
// scenarios writes a JSON list of {name, status, detail, seconds}; bench prints one JSON line of
// figures (bench.go). Subjects and topics carry a per-run tag so that runs never collide.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"time"
)

type result struct {
	Name    string  `json:"name"`
	Status  string  `json:"status"`
	Detail  string  `json:"detail"`
	Seconds float64 `json:"seconds"`
}

type scenario struct {
	name  string
	quick bool
	run   func(*env) error
}

type env struct {
	registry  string
	bootstrap string
	tag       string
}

func (e *env) subject(name string) string { return fmt.Sprintf("sr-%s-%s", e.tag, name) }

var scenarios []scenario

func add(name string, quick bool, fn func(*env) error) {
	scenarios = append(scenarios, scenario{name, quick, fn})
}

func failf(format string, a ...any) error { return fmt.Errorf(format, a...) }

func check(cond bool, format string, a ...any) error {
	if !cond {
		return fmt.Errorf(format, a...)
	}
	return nil
}

const (
	avroA     = `{"type":"record","name":"Rec","namespace":"es.compat","fields":[{"name":"a","type":"int"}]}`
	avroABDef = `{"type":"record","name":"Rec","namespace":"es.compat","fields":[{"name":"a","type":"int"},{"name":"b","type":"string","default":"x"}]}`
	avroAStr  = `{"type":"record","name":"Rec","namespace":"es.compat","fields":[{"name":"a","type":"string"}]}`
	jsonUser  = `{"$schema":"http://json-schema.org/draft-07/schema#","title":"User","type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"],"additionalProperties":false}`
	protoRec  = "syntax = \"proto3\";\npackage es.compat;\nmessage Rec {\n  string name = 1;\n  int64 count = 2;\n}\n"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: srgo scenarios|bench ...")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "scenarios":
		os.Exit(runScenarios(os.Args[2:]))
	case "bench":
		os.Exit(runBench(os.Args[2:]))
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}

func runScenarios(args []string) int {
	fs := flag.NewFlagSet("scenarios", flag.ExitOnError)
	registry := fs.String("registry", "", "registry URL")
	bootstrap := fs.String("bootstrap", "", "Kafka bootstrap HOST:PORT")
	out := fs.String("out", "", "results file")
	quick := fs.Bool("quick", false, "the quick subset")
	only := fs.String("only", "", "comma-separated name prefixes")
	_ = fs.Parse(args)
	if *registry == "" || *bootstrap == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "srgo scenarios: --registry, --bootstrap and --out are required")
		return 2
	}
	e := &env{registry: *registry, bootstrap: *bootstrap, tag: fmt.Sprintf("%08x", rand.New(rand.NewSource(time.Now().UnixNano())).Uint32())}
	var prefixes []string
	for _, p := range strings.Split(*only, ",") {
		if p != "" {
			prefixes = append(prefixes, p)
		}
	}
	results := []result{}
	for _, s := range scenarios {
		if *quick && !s.quick {
			continue
		}
		if len(prefixes) > 0 {
			match := false
			for _, p := range prefixes {
				if strings.HasPrefix(s.name, p) {
					match = true
				}
			}
			if !match {
				continue
			}
		}
		t0 := time.Now()
		err := safeRun(s.run, e)
		r := result{Name: s.name, Status: "passed", Seconds: float64(time.Since(t0).Milliseconds()) / 1000}
		if err != nil {
			r.Status, r.Detail = "failed", err.Error()
			if len(r.Detail) > 800 {
				r.Detail = r.Detail[:800]
			}
		}
		results = append(results, r)
		line := fmt.Sprintf("  %-6s %s (%.2fs)", r.Status, r.Name, r.Seconds)
		if r.Detail != "" {
			d := r.Detail
			if len(d) > 200 {
				d = d[:200]
			}
			line += " - " + d
		}
		fmt.Println(line)
	}
	b, _ := json.MarshalIndent(results, "", " ")
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// safeRun turns a panic inside a library into a failed scenario rather than a lost run.
func safeRun(fn func(*env) error, e *env) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return fn(e)
}
