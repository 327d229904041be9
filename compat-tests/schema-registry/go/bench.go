// bench: registration and lookup requests per second and latency percentiles against one
// registry, with plain net/http keep-alive connections (the same client for every registry, so
// the figures compare servers, not client libraries).
//
//	srgo bench --registry URL --op register|lookup|get-by-id --concurrency N --requests N [--max-seconds S]
//
// register: every request registers a new schema in a new subject (POST /subjects/{s}/versions;
// a new id each time, no compatibility check, since a new subject has no earlier version).
// lookup: POST /subjects/{s} of one of 100 schemas registered before the clock starts.
// get-by-id: GET /schemas/ids/{id} of one of those 100 ids.
// Every request must answer 200 with the expected id; any other answer counts as an error.
// Bounded: --requests in total, and never longer than --max-seconds.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

const benchPreloaded = 100

func benchSchema(tag string, i int) string {
	return fmt.Sprintf(`{"type":"record","name":"Bench%s_%d","namespace":"es.bench","fields":[{"name":"a","type":"int"},{"name":"f%d","type":"string","default":""}]}`, tag, i, i)
}

type benchClient struct {
	url string
	hc  *http.Client
}

func (c *benchClient) do(method, path string, body any) (int, map[string]any, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.url+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	req.Header.Set("Accept", "application/vnd.schemaregistry.v1+json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, nil, err
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m, nil
}

func idOf(m map[string]any) int {
	if v, ok := m["id"].(float64); ok {
		return int(v)
	}
	return -1
}

func runBench(args []string) int {
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	registry := fs.String("registry", "", "registry URL")
	op := fs.String("op", "lookup", "register | lookup | get-by-id")
	conc := fs.Int("concurrency", 8, "concurrent requests")
	total := fs.Int("requests", 5000, "requests in all")
	maxSeconds := fs.Float64("max-seconds", 60, "stop after this long even if requests remain")
	label := fs.String("label", "", "a name for the registry in the output")
	_ = fs.Parse(args)
	if *registry == "" || *conc < 1 || *total < 1 {
		fmt.Fprintln(os.Stderr, "srgo bench: --registry, --concurrency >= 1 and --requests >= 1 are required")
		return 2
	}
	c := &benchClient{url: *registry, hc: &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{MaxIdleConns: *conc * 2, MaxIdleConnsPerHost: *conc * 2}}}
	tag := fmt.Sprintf("%08x", rand.New(rand.NewSource(time.Now().UnixNano())).Uint32())

	// Preload what lookups read (not timed).
	type pre struct {
		subject, schema string
		id              int
	}
	var preload []pre
	if *op != "register" {
		for i := 0; i < benchPreloaded; i++ {
			s, sch := fmt.Sprintf("bench-%s-pre-%d", tag, i), benchSchema(tag, i)
			code, m, err := c.do("POST", "/subjects/"+s+"/versions", map[string]string{"schema": sch})
			if err != nil || code != 200 || idOf(m) < 0 {
				fmt.Fprintf(os.Stderr, "srgo bench: preloading %s: HTTP %d %v %v\n", s, code, m, err)
				return 1
			}
			preload = append(preload, pre{s, sch, idOf(m)})
		}
	}

	var next, errs atomic.Int64
	lat := make([][]time.Duration, *conc)
	deadline := time.Now().Add(time.Duration(*maxSeconds * float64(time.Second)))
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < *conc; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w) + 1))
			for {
				i := int(next.Add(1)) - 1
				if i >= *total || time.Now().After(deadline) {
					return
				}
				t0 := time.Now()
				var code int
				var m map[string]any
				var err error
				want := -1
				switch *op {
				case "register":
					code, m, err = c.do("POST", fmt.Sprintf("/subjects/bench-%s-reg-%d/versions", tag, i),
						map[string]string{"schema": benchSchema(tag, benchPreloaded+i)})
				case "lookup":
					p := preload[rng.Intn(len(preload))]
					want = p.id
					code, m, err = c.do("POST", "/subjects/"+p.subject, map[string]string{"schema": p.schema})
				case "get-by-id":
					p := preload[rng.Intn(len(preload))]
					code, m, err = c.do("GET", fmt.Sprintf("/schemas/ids/%d", p.id), nil)
					if m != nil {
						m["id"] = float64(p.id) // the answer has no id field; a 200 with a schema is the check
						if _, ok := m["schema"]; !ok {
							m = nil
						}
					}
					want = p.id
				}
				d := time.Since(t0)
				ok := err == nil && code == 200 && idOf(m) >= 0 && (want < 0 || idOf(m) == want)
				if !ok {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("HTTP %d %v %v", code, m, err))
					continue
				}
				lat[w] = append(lat[w], d)
			}
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(a, b int) bool { return all[a] < all[b] })
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		i := int(p * float64(len(all)-1))
		return float64(all[i].Microseconds()) / 1000
	}
	out := map[string]any{
		"registry": *label, "url": *registry, "op": *op, "concurrency": *conc,
		"ok": len(all), "errors": errs.Load(), "seconds": elapsed.Seconds(),
		"rps": float64(len(all)) / elapsed.Seconds(), "p50_ms": pct(0.50), "p99_ms": pct(0.99), "max_ms": pct(1.0),
	}
	if fe := firstErr.Load(); fe != nil {
		out["first_error"] = fe
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
	if errs.Load() > 0 {
		return 1
	}
	return 0
}
