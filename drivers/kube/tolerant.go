package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	celldscheme "github.com/celld/celld-operator/api/generated/clientset/versioned/scheme"
	"github.com/celld/celld-operator/api/v1alpha1"
)

// Undecodable is one celld.io object the operator's types cannot decode. With StatusDropped the
// object was decoded without its status (which the operator never reads to decide) and is
// served; without, it is left out of the cache and not served until it is fixed.
type Undecodable struct {
	Kind, Namespace, Name string
	Object                runtime.Object // a stub with the object's metadata, for an Event
	StatusDropped         bool
	Err                   error
}

// tolerantLW lists and watches one celld.io resource with raw requests and decodes every item on
// its own: one object the types cannot decode (stored before a CRD tightened, or written past
// admission) must not fail the whole list, or the cache never syncs and no fleet is served.
type tolerantLW struct {
	rc        rest.Interface
	resource  string
	namespace string
	gvk       schema.GroupVersionKind
	newObj    func() runtime.Object
	newList   func() runtime.Object
	report    func(Undecodable)
}

func newTolerantInformer(rc rest.Interface, resource, kind, namespace string, newObj, newList func() runtime.Object, report func(Undecodable)) cache.SharedIndexInformer {
	t := &tolerantLW{rc: rc, resource: resource, namespace: namespace, gvk: v1alpha1.SchemeGroupVersion.WithKind(kind),
		newObj: newObj, newList: newList, report: report}
	lw := listThenWatch{&cache.ListWatch{ListWithContextFunc: t.list, WatchFuncWithContext: t.watch}}
	return cache.NewSharedIndexInformer(lw, newObj(), 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}

// listThenWatch keeps the reflector on one list, then a watch: a list of celld.io objects is one
// small request, and the list path is the one that reports every undecodable object at once.
type listThenWatch struct{ *cache.ListWatch }

func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }

func (t *tolerantLW) request(opts *metav1.ListOptions) *rest.Request {
	return t.rc.Get().NamespaceIfScoped(t.namespace, t.namespace != "").Resource(t.resource).
		VersionedParams(opts, celldscheme.ParameterCodec)
}

// decode decodes one item; nil with the object's metadata when even its spec does not decode.
func (t *tolerantLW) decode(raw []byte) (runtime.Object, *metav1.PartialObjectMetadata) {
	obj, err := t.decodeAs(raw)
	if err == nil {
		return obj, nil
	}
	pm := &metav1.PartialObjectMetadata{}
	_ = json.Unmarshal(raw, pm)
	u := Undecodable{Kind: t.gvk.Kind, Namespace: pm.Namespace, Name: pm.Name, Err: err}
	// The status is rebuilt from observation (a fleet) or only narrows what the policy allows when
	// empty (a reservation's history): without it the object is still served, and still holds
	// its bucket.
	var m map[string]any
	if json.Unmarshal(raw, &m) == nil {
		delete(m, "status")
		if stripped, err2 := json.Marshal(m); err2 == nil {
			if obj, err2 := t.decodeAs(stripped); err2 == nil {
				u.StatusDropped, u.Object = true, obj
				t.report(u)
				return obj, nil
			}
		}
	}
	u.Object = t.stub(pm)
	t.report(u)
	return nil, pm
}

func (t *tolerantLW) decodeAs(raw []byte) (runtime.Object, error) {
	gvk := t.gvk
	obj, _, err := celldscheme.Codecs.UniversalDeserializer().Decode(raw, &gvk, t.newObj())
	return obj, err
}

// stub is a typed object with only pm's metadata: what a watch deletes from the cache, and what
// an Event names.
func (t *tolerantLW) stub(pm *metav1.PartialObjectMetadata) runtime.Object {
	obj := t.newObj()
	if a, err := meta.Accessor(obj); err == nil {
		a.SetNamespace(pm.Namespace)
		a.SetName(pm.Name)
		a.SetUID(pm.UID)
		a.SetResourceVersion(pm.ResourceVersion)
	}
	obj.GetObjectKind().SetGroupVersionKind(t.gvk)
	return obj
}

func (t *tolerantLW) list(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	raw, err := t.request(&opts).Do(ctx).Raw()
	if err != nil {
		return nil, err
	}
	var page struct {
		Metadata metav1.ListMeta   `json:"metadata"`
		Items    []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(raw, &page); err != nil {
		return nil, fmt.Errorf("decode %s list: %w", t.resource, err)
	}
	items := make([]runtime.Object, 0, len(page.Items))
	for _, it := range page.Items {
		if obj, _ := t.decode(it); obj != nil {
			items = append(items, obj)
		}
	}
	list := t.newList()
	if err := meta.SetList(list, items); err != nil {
		return nil, err
	}
	if a, err := meta.ListAccessor(list); err == nil {
		a.SetResourceVersion(page.Metadata.ResourceVersion)
		a.SetContinue(page.Metadata.Continue)
		a.SetRemainingItemCount(page.Metadata.RemainingItemCount)
	}
	return list, nil
}

func (t *tolerantLW) watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	body, err := t.request(&opts).Stream(ctx)
	if err != nil {
		return nil, err
	}
	w := &rawWatch{body: body, ch: make(chan watch.Event), done: make(chan struct{})}
	go w.run(t)
	return w, nil
}

// rawWatch decodes a watch stream event by event. An object that stops decoding is removed from
// the cache (a deletion of its stub), so the operator never acts on its last good copy.
type rawWatch struct {
	body io.ReadCloser
	ch   chan watch.Event
	done chan struct{}
	once sync.Once
}

func (w *rawWatch) Stop() {
	w.once.Do(func() {
		close(w.done)
		_ = w.body.Close()
	})
}

func (w *rawWatch) ResultChan() <-chan watch.Event { return w.ch }

func (w *rawWatch) run(t *tolerantLW) {
	defer close(w.ch)
	defer w.Stop()
	dec := json.NewDecoder(w.body)
	for {
		var ev metav1.WatchEvent
		if err := dec.Decode(&ev); err != nil {
			return
		}
		out := watch.Event{Type: watch.EventType(ev.Type)}
		switch out.Type {
		case watch.Error:
			status := &metav1.Status{}
			if err := json.Unmarshal(ev.Object.Raw, status); err != nil {
				return
			}
			out.Object = status
		case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
			obj, pm := t.decode(ev.Object.Raw)
			if obj == nil {
				obj = t.stub(pm)
				if out.Type != watch.Bookmark {
					out.Type = watch.Deleted
				}
			}
			out.Object = obj
		default:
			continue
		}
		select {
		case w.ch <- out:
		case <-w.done:
			return
		}
	}
}
