package kube

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/cache"
)

// ParseNamespaces reads a --namespace value: empty is every namespace, otherwise a
// comma-separated list of namespace names, returned sorted and without repeats.
func ParseNamespaces(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	seen := map[string]bool{}
	var out []string
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			return nil, fmt.Errorf("--namespace %q names an empty namespace: list names separated by single commas, for example team-a,team-b", s)
		}
		if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
			return nil, fmt.Errorf("--namespace names %q, which is not a namespace name: %s", n, strings.Join(errs, "; "))
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

// perNamespace is one cache of a kind over namespaces: every namespace when the list is empty,
// the single informer of one namespace, or a multiInformer joining one informer per namespace.
// Per-namespace informers, not one cluster-wide informer filtered here, so that a Role in each
// watched namespace is all the operator needs to read there.
func perNamespace(namespaces []string, build func(namespace string) cache.SharedIndexInformer) cache.SharedIndexInformer {
	if len(namespaces) == 0 {
		return build("")
	}
	if len(namespaces) == 1 {
		return build(namespaces[0])
	}
	m := &multiInformer{parts: map[string]cache.SharedIndexInformer{}}
	for _, ns := range namespaces {
		m.order = append(m.order, ns)
		m.parts[ns] = build(ns)
	}
	return m
}

// multiInformer joins the informers of several namespaces into one SharedIndexInformer: a
// handler added to it is added to every part, its indexer reads all of them, and it has synced
// when every part has. Each part calls the handlers from its own goroutine, as two informers of
// different kinds already do.
type multiInformer struct {
	order []string
	parts map[string]cache.SharedIndexInformer
}

var _ cache.SharedIndexInformer = (*multiInformer)(nil)

func (m *multiInformer) each(f func(cache.SharedIndexInformer) error) error {
	var errs []error
	for _, ns := range m.order {
		if err := f(m.parts[ns]); err != nil {
			errs = append(errs, fmt.Errorf("namespace %s: %w", ns, err))
		}
	}
	return errors.Join(errs...)
}

func (m *multiInformer) addHandler(add func(cache.SharedIndexInformer) (cache.ResourceEventHandlerRegistration, error)) (cache.ResourceEventHandlerRegistration, error) {
	reg := &multiRegistration{parts: map[cache.SharedIndexInformer]cache.ResourceEventHandlerRegistration{}}
	err := m.each(func(inf cache.SharedIndexInformer) error {
		r, err := add(inf)
		if err == nil {
			reg.parts[inf] = r
		}
		return err
	})
	return reg, err
}

func (m *multiInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return m.addHandler(func(inf cache.SharedIndexInformer) (cache.ResourceEventHandlerRegistration, error) {
		return inf.AddEventHandler(h)
	})
}

func (m *multiInformer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return m.addHandler(func(inf cache.SharedIndexInformer) (cache.ResourceEventHandlerRegistration, error) {
		return inf.AddEventHandlerWithResyncPeriod(h, resync)
	})
}

func (m *multiInformer) AddEventHandlerWithOptions(h cache.ResourceEventHandler, o cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return m.addHandler(func(inf cache.SharedIndexInformer) (cache.ResourceEventHandlerRegistration, error) {
		return inf.AddEventHandlerWithOptions(h, o)
	})
}

func (m *multiInformer) RemoveEventHandler(handle cache.ResourceEventHandlerRegistration) error {
	reg, ok := handle.(*multiRegistration)
	if !ok {
		return fmt.Errorf("registration %T was not made by this informer", handle)
	}
	return m.each(func(inf cache.SharedIndexInformer) error {
		if r, ok := reg.parts[inf]; ok {
			return inf.RemoveEventHandler(r)
		}
		return nil
	})
}

func (m *multiInformer) GetStore() cache.Store { return m.GetIndexer() }

// GetController is nil: there is one controller per namespace and none speaks for all of them.
func (m *multiInformer) GetController() cache.Controller { return nil }

func (m *multiInformer) Run(stop <-chan struct{}) {
	var wg sync.WaitGroup
	for _, ns := range m.order {
		inf := m.parts[ns]
		wg.Add(1)
		go func() { defer wg.Done(); inf.Run(stop) }()
	}
	wg.Wait()
}

func (m *multiInformer) RunWithContext(ctx context.Context) { m.Run(ctx.Done()) }

func (m *multiInformer) HasSynced() bool {
	for _, inf := range m.parts {
		if !inf.HasSynced() {
			return false
		}
	}
	return true
}

func (m *multiInformer) HasSyncedChecker() cache.DoneChecker {
	checkers := make([]cache.DoneChecker, 0, len(m.order))
	for _, ns := range m.order {
		checkers = append(checkers, m.parts[ns].HasSyncedChecker())
	}
	return allDone(checkers)
}

// LastSyncResourceVersion is empty: each namespace's list has its own.
func (m *multiInformer) LastSyncResourceVersion() string { return "" }

func (m *multiInformer) SetWatchErrorHandler(h cache.WatchErrorHandler) error {
	return m.each(func(inf cache.SharedIndexInformer) error { return inf.SetWatchErrorHandler(h) })
}

func (m *multiInformer) SetWatchErrorHandlerWithContext(h cache.WatchErrorHandlerWithContext) error {
	return m.each(func(inf cache.SharedIndexInformer) error { return inf.SetWatchErrorHandlerWithContext(h) })
}

func (m *multiInformer) SetTransform(t cache.TransformFunc) error {
	return m.each(func(inf cache.SharedIndexInformer) error { return inf.SetTransform(t) })
}

func (m *multiInformer) IsStopped() bool {
	for _, inf := range m.parts {
		if !inf.IsStopped() {
			return false
		}
	}
	return true
}

func (m *multiInformer) AddIndexers(ix cache.Indexers) error {
	return m.each(func(inf cache.SharedIndexInformer) error { return inf.AddIndexers(ix) })
}

func (m *multiInformer) GetIndexer() cache.Indexer { return multiIndexer{m} }

// multiRegistration is a handler's registrations with every part.
type multiRegistration struct {
	parts map[cache.SharedIndexInformer]cache.ResourceEventHandlerRegistration
}

func (r *multiRegistration) HasSynced() bool {
	for _, p := range r.parts {
		if !p.HasSynced() {
			return false
		}
	}
	return true
}

func (r *multiRegistration) HasSyncedChecker() cache.DoneChecker {
	checkers := make([]cache.DoneChecker, 0, len(r.parts))
	for _, p := range r.parts {
		checkers = append(checkers, p.HasSyncedChecker())
	}
	return allDone(checkers)
}

// doneAll is done when every one of its checkers is.
type doneAll struct {
	name string
	done chan struct{}
}

func allDone(checkers []cache.DoneChecker) cache.DoneChecker {
	names := make([]string, 0, len(checkers))
	for _, c := range checkers {
		names = append(names, c.Name())
	}
	d := &doneAll{name: strings.Join(names, "+"), done: make(chan struct{})}
	go func() {
		for _, c := range checkers {
			<-c.Done()
		}
		close(d.done)
	}()
	return d
}

func (d *doneAll) Name() string { return d.name }

func (d *doneAll) Done() <-chan struct{} { return d.done }

// multiIndexer reads the parts' indexers as one. It is read-only, as an informer's indexer is to
// everyone but the informer: the parts' informers write their own.
type multiIndexer struct{ m *multiInformer }

var errReadOnly = errors.New("the cache of several namespaces is written by its informers only")

func (x multiIndexer) Add(any) error                        { return errReadOnly }
func (x multiIndexer) Update(any) error                     { return errReadOnly }
func (x multiIndexer) Delete(any) error                     { return errReadOnly }
func (x multiIndexer) Replace([]any, string) error          { return errReadOnly }
func (x multiIndexer) Resync() error                        { return nil }
func (x multiIndexer) Bookmark(string)                      {}
func (x multiIndexer) LastStoreSyncResourceVersion() string { return "" }

func (x multiIndexer) List() []any {
	var out []any
	for _, ns := range x.m.order {
		out = append(out, x.m.parts[ns].GetIndexer().List()...)
	}
	return out
}

func (x multiIndexer) ListKeys() []string {
	var out []string
	for _, ns := range x.m.order {
		out = append(out, x.m.parts[ns].GetIndexer().ListKeys()...)
	}
	return out
}

func (x multiIndexer) Get(obj any) (any, bool, error) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return nil, false, err
	}
	return x.GetByKey(key)
}

// GetByKey reads the part of the key's namespace; an object of a namespace not watched does not
// exist here.
func (x multiIndexer) GetByKey(key string) (any, bool, error) {
	ns, _, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, false, err
	}
	part, ok := x.m.parts[ns]
	if !ok {
		return nil, false, nil
	}
	return part.GetIndexer().GetByKey(key)
}

func (x multiIndexer) Index(name string, obj any) ([]any, error) {
	// An object's namespace says which part can hold what shares its index values, but index
	// functions here are not all per namespace (a bucket is cluster-wide), so every part is read.
	var out []any
	for _, ns := range x.m.order {
		objs, err := x.m.parts[ns].GetIndexer().Index(name, obj)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

func (x multiIndexer) IndexKeys(name, value string) ([]string, error) {
	var out []string
	for _, ns := range x.m.order {
		keys, err := x.m.parts[ns].GetIndexer().IndexKeys(name, value)
		if err != nil {
			return nil, err
		}
		out = append(out, keys...)
	}
	return out, nil
}

func (x multiIndexer) ListIndexFuncValues(name string) []string {
	seen := map[string]bool{}
	var out []string
	for _, ns := range x.m.order {
		for _, v := range x.m.parts[ns].GetIndexer().ListIndexFuncValues(name) {
			if !seen[v] {
				seen[v] = true
				out = append(out, v)
			}
		}
	}
	return out
}

func (x multiIndexer) ByIndex(name, value string) ([]any, error) {
	var out []any
	for _, ns := range x.m.order {
		objs, err := x.m.parts[ns].GetIndexer().ByIndex(name, value)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// GetIndexers are the first part's: AddIndexers gives every part the same.
func (x multiIndexer) GetIndexers() cache.Indexers {
	return x.m.parts[x.m.order[0]].GetIndexer().GetIndexers()
}

func (x multiIndexer) AddIndexers(ix cache.Indexers) error { return x.m.AddIndexers(ix) }
