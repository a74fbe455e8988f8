// Package metrics keeps the sidecar's Prometheus series and writes them in the
// text exposition format (version 0.0.4) that every Prometheus scraper reads.
//
// It holds what stepseq needs and no more: counters, gauges and histograms,
// with or without labels, values read at scrape time, and the process's and
// runtime's own figures. It has no package-level state, so every command pays
// nothing for it before main; the Prometheus client library initialises its
// default registry, its collectors and protobuf at start-up, a third of the
// binary's start.
package metrics

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Collector is one metric family: a name, its help, and its samples.
type Collector interface {
	desc() *family
}

// family is what every collector shares: name, help, type and label names.
type family struct {
	name, help, typ string
	labels          []string
	// write appends the family's samples, after its HELP and TYPE lines.
	write func(w *textWriter)
}

func (f *family) desc() *family { return f }

// Opts names a series and says what it counts.
type Opts struct {
	Name, Help string
}

// Registry is a set of collectors with distinct names.
type Registry struct {
	mu       sync.Mutex
	families map[string]Collector
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{families: map[string]Collector{}}
}

// AlreadyRegisteredError is Register's error for a name taken; Existing is the
// collector that holds it.
type AlreadyRegisteredError struct {
	Existing Collector
}

func (e AlreadyRegisteredError) Error() string {
	return fmt.Sprintf("metric %s is already registered", e.Existing.desc().name)
}

// Register adds c, or says which collector already holds its name.
func (r *Registry) Register(c Collector) error {
	name := c.desc().name
	if !validName(name) {
		return fmt.Errorf("metric name %q: use letters, digits, _ and : only, not starting with a digit", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if existing, ok := r.families[name]; ok {
		return AlreadyRegisteredError{Existing: existing}
	}
	r.families[name] = c
	return nil
}

// MustRegister registers every collector and panics on the first refusal: a
// name given twice is a programming error.
func (r *Registry) MustRegister(cs ...Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// Registered returns the collector registered under name as a C, or c itself
// once registered, so that a part made again (a new plan, a restart) counts on
// where it left off.
func Registered[C Collector](r *Registry, c C) C {
	err := r.Register(c)
	if are, ok := err.(AlreadyRegisteredError); ok {
		if existing, ok := are.Existing.(C); ok {
			return existing
		}
	}
	return c
}

// WriteText writes every family, sorted by name, in the text format.
func (r *Registry) WriteText(w io.Writer) error {
	r.mu.Lock()
	names := make([]string, 0, len(r.families))
	for name := range r.families {
		names = append(names, name)
	}
	cs := make([]Collector, 0, len(names))
	slices.Sort(names)
	for _, name := range names {
		cs = append(cs, r.families[name])
	}
	r.mu.Unlock()

	tw := &textWriter{}
	for _, c := range cs {
		f := c.desc()
		tw.buf.WriteString("# HELP ")
		tw.buf.WriteString(f.name)
		tw.buf.WriteByte(' ')
		tw.buf.WriteString(escapeHelp(f.help))
		tw.buf.WriteString("\n# TYPE ")
		tw.buf.WriteString(f.name)
		tw.buf.WriteByte(' ')
		tw.buf.WriteString(f.typ)
		tw.buf.WriteByte('\n')
		f.write(tw)
	}
	_, err := w.Write(tw.buf.Bytes())
	return err
}

// ContentType is the text format's media type.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// ServeHTTP answers a scrape.
func (r *Registry) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	var buf bytes.Buffer
	if err := r.WriteText(&buf); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", ContentType)
	_, _ = w.Write(buf.Bytes())
}

// Value returns the current value of the counter or gauge name with the given
// label values, and whether there is one: what tests and probes read without
// parsing a scrape.
func (r *Registry) Value(name string, labelValues ...string) (float64, bool) {
	r.mu.Lock()
	c, ok := r.families[name]
	r.mu.Unlock()
	if !ok {
		return 0, false
	}
	switch c := c.(type) {
	case interface{ value() float64 }: // counters, gauges and their funcs
		return c.value(), len(labelValues) == 0
	case interface {
		labelled([]string) (float64, bool)
	}: // their families
		return c.labelled(labelValues)
	}
	return 0, false
}

// textWriter accumulates a scrape.
type textWriter struct {
	buf bytes.Buffer
}

// sample writes one line: name{labels} value.
func (w *textWriter) sample(name string, labels []string, values []string, extraName, extraValue string, v float64) {
	w.buf.WriteString(name)
	if len(labels) > 0 || extraName != "" {
		w.buf.WriteByte('{')
		for i, l := range labels {
			if i > 0 {
				w.buf.WriteByte(',')
			}
			w.label(l, values[i])
		}
		if extraName != "" {
			if len(labels) > 0 {
				w.buf.WriteByte(',')
			}
			w.label(extraName, extraValue)
		}
		w.buf.WriteByte('}')
	}
	w.buf.WriteByte(' ')
	w.buf.WriteString(formatFloat(v))
	w.buf.WriteByte('\n')
}

func (w *textWriter) label(name, value string) {
	w.buf.WriteString(name)
	w.buf.WriteString(`="`)
	w.buf.WriteString(escapeLabel(value))
	w.buf.WriteByte('"')
}

func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

func escapeHelp(s string) string  { return helpEscaper.Replace(s) }
func escapeLabel(s string) string { return labelEscaper.Replace(s) }

func validName(name string) bool {
	if name == "" {
		return false
	}
	for i, r := range name {
		switch {
		case r == '_' || r == ':' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z'):
		case '0' <= r && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// atomicFloat is a float64 updated without a lock.
type atomicFloat struct {
	bits atomic.Uint64
}

func (a *atomicFloat) load() float64   { return math.Float64frombits(a.bits.Load()) }
func (a *atomicFloat) store(v float64) { a.bits.Store(math.Float64bits(v)) }
func (a *atomicFloat) add(d float64) {
	for {
		old := a.bits.Load()
		if a.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+d)) {
			return
		}
	}
}

// Counter only goes up.
type Counter struct {
	*valueFunc
	CounterChild
}

// NewCounter returns a counter at 0.
func NewCounter(o Opts) *Counter {
	v := new(atomicFloat)
	return &Counter{newValueFunc(o, "counter", v.load), CounterChild{v}}
}

// Gauge goes up and down.
type Gauge struct {
	*valueFunc
	GaugeChild
}

// NewGauge returns a gauge at 0.
func NewGauge(o Opts) *Gauge {
	v := new(atomicFloat)
	return &Gauge{newValueFunc(o, "gauge", v.load), GaugeChild{v}}
}

// valueFunc is a counter or gauge whose value is read at scrape time.
type valueFunc struct {
	family
	fn func() float64
}

// NewCounterFunc is a counter read from fn at every scrape.
func NewCounterFunc(o Opts, fn func() float64) Collector {
	return newValueFunc(o, "counter", fn)
}

// NewGaugeFunc is a gauge read from fn at every scrape.
func NewGaugeFunc(o Opts, fn func() float64) Collector {
	return newValueFunc(o, "gauge", fn)
}

func (f *valueFunc) value() float64 { return f.fn() }

func newValueFunc(o Opts, typ string, fn func() float64) *valueFunc {
	f := &valueFunc{family: family{name: o.Name, help: o.Help, typ: typ}, fn: fn}
	f.write = func(w *textWriter) { w.sample(f.name, nil, nil, "", "", f.fn()) }
	return f
}

// vec holds the children of a labelled family, by label values.
type vec[T any] struct {
	mu       sync.Mutex
	labels   []string
	children map[string]*child[T]
	make     func() *T
}

type child[T any] struct {
	values []string
	v      *T
}

func newVec[T any](labels []string, mk func() *T) *vec[T] {
	return &vec[T]{labels: labels, children: map[string]*child[T]{}, make: mk}
}

// with returns the child for values, made on first use.
func (v *vec[T]) with(values []string) *T {
	if len(values) != len(v.labels) {
		panic(fmt.Sprintf("metrics: %d label values for %d labels %v", len(values), len(v.labels), v.labels))
	}
	key := strings.Join(values, "\xff")
	v.mu.Lock()
	defer v.mu.Unlock()
	c, ok := v.children[key]
	if !ok {
		c = &child[T]{values: slices.Clone(values), v: v.make()}
		v.children[key] = c
	}
	return c.v
}

// sorted returns the children ordered by their label values.
func (v *vec[T]) sorted() []*child[T] {
	v.mu.Lock()
	out := make([]*child[T], 0, len(v.children))
	for _, c := range v.children {
		out = append(out, c)
	}
	v.mu.Unlock()
	slices.SortFunc(out, func(a, b *child[T]) int { return slices.Compare(a.values, b.values) })
	return out
}

// lookup returns the child for values, if it was made.
func (v *vec[T]) lookup(values []string) (*T, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	c, ok := v.children[strings.Join(values, "\xff")]
	if !ok {
		return nil, false
	}
	return c.v, true
}

// floatVec is a counter or gauge family: a value per combination of labels.
type floatVec struct {
	family
	vec *vec[atomicFloat]
}

func newFloatVec(o Opts, typ string, labels []string) floatVec {
	v := newVec(labels, func() *atomicFloat { return new(atomicFloat) })
	return floatVec{vec: v, family: family{name: o.Name, help: o.Help, typ: typ, labels: labels, write: func(w *textWriter) {
		for _, c := range v.sorted() {
			w.sample(o.Name, labels, c.values, "", "", c.v.load())
		}
	}}}
}

// labelled is the value for label values, if it was set.
func (f *floatVec) labelled(values []string) (float64, bool) {
	v, ok := f.vec.lookup(values)
	if !ok {
		return 0, false
	}
	return v.load(), true
}

// CounterVec is a counter per combination of label values.
type CounterVec struct{ floatVec }

// NewCounterVec returns a counter family with the given label names.
func NewCounterVec(o Opts, labels []string) *CounterVec {
	return &CounterVec{newFloatVec(o, "counter", labels)}
}

// GaugeVec is a gauge per combination of label values.
type GaugeVec struct{ floatVec }

// NewGaugeVec returns a gauge family with the given label names.
func NewGaugeVec(o Opts, labels []string) *GaugeVec {
	return &GaugeVec{newFloatVec(o, "gauge", labels)}
}

// CounterChild is one labelled counter.
type CounterChild struct{ v *atomicFloat }

// Inc adds 1.
func (c CounterChild) Inc() { c.v.add(1) }

// Add adds d, which must not be negative.
func (c CounterChild) Add(d float64) {
	if d < 0 {
		panic("metrics: a counter cannot decrease")
	}
	c.v.add(d)
}

// WithLabelValues returns the counter for these label values, in the order the
// labels were named.
func (c *CounterVec) WithLabelValues(values ...string) CounterChild {
	return CounterChild{c.vec.with(values)}
}

// GaugeChild is one labelled gauge.
type GaugeChild struct{ v *atomicFloat }

// Set sets the gauge to v.
func (g GaugeChild) Set(v float64) { g.v.store(v) }

// Add adds d (negative to subtract).
func (g GaugeChild) Add(d float64) { g.v.add(d) }

// WithLabelValues returns the gauge for these label values.
func (g *GaugeVec) WithLabelValues(values ...string) GaugeChild {
	return GaugeChild{g.vec.with(values)}
}

// HistogramOpts adds the buckets' upper bounds, ascending, to Opts.
type HistogramOpts struct {
	Name, Help string
	Buckets    []float64
}

// histogramData counts observations per bucket.
type histogramData struct {
	mu     sync.Mutex
	upper  []float64
	counts []uint64 // per bucket, not cumulative
	count  uint64
	sum    float64
}

func newHistogramData(upper []float64) *histogramData {
	return &histogramData{upper: upper, counts: make([]uint64, len(upper))}
}

// Observe adds v.
func (h *histogramData) Observe(v float64) {
	i, _ := slices.BinarySearch(h.upper, v) // the first bound ≥ v
	h.mu.Lock()
	if i < len(h.counts) {
		h.counts[i]++
	}
	h.count++
	h.sum += v
	h.mu.Unlock()
}

func (h *histogramData) write(w *textWriter, name string, labels, values []string) {
	h.mu.Lock()
	counts, count, sum := slices.Clone(h.counts), h.count, h.sum
	h.mu.Unlock()
	var cum uint64
	for i, le := range h.upper {
		cum += counts[i]
		w.sample(name+"_bucket", labels, values, "le", formatFloat(le), float64(cum))
	}
	w.sample(name+"_bucket", labels, values, "le", "+Inf", float64(count))
	w.sample(name+"_sum", labels, values, "", "", sum)
	w.sample(name+"_count", labels, values, "", "", float64(count))
}

func checkBuckets(name string, b []float64) []float64 {
	if !slices.IsSorted(b) || slices.Contains(b, math.Inf(1)) {
		panic(fmt.Sprintf("metrics: %s: buckets must ascend and leave +Inf out", name))
	}
	return slices.Clone(b)
}

// Histogram counts observations into buckets.
type Histogram struct {
	family
	*histogramData
}

// NewHistogram returns an empty histogram.
func NewHistogram(o HistogramOpts) *Histogram {
	d := newHistogramData(checkBuckets(o.Name, o.Buckets))
	return &Histogram{family{name: o.Name, help: o.Help, typ: "histogram", write: func(w *textWriter) {
		d.write(w, o.Name, nil, nil)
	}}, d}
}

// HistogramVec is a histogram per combination of label values.
type HistogramVec struct {
	family
	vec *vec[histogramData]
}

// NewHistogramVec returns a histogram family with the given label names.
func NewHistogramVec(o HistogramOpts, labels []string) *HistogramVec {
	upper := checkBuckets(o.Name, o.Buckets)
	v := newVec(labels, func() *histogramData { return newHistogramData(upper) })
	h := &HistogramVec{vec: v}
	h.family = family{name: o.Name, help: o.Help, typ: "histogram", labels: labels, write: func(w *textWriter) {
		for _, c := range v.sorted() {
			c.v.write(w, o.Name, labels, c.values)
		}
	}}
	return h
}

// Observer takes observations.
type Observer interface{ Observe(float64) }

// WithLabelValues returns the histogram for these label values.
func (h *HistogramVec) WithLabelValues(values ...string) Observer {
	return h.vec.with(values)
}
