package webhook

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-dev/lockstep/internal/podgroup"
	"github.com/lockstep-dev/lockstep/test/builders"
)

// testReads reads from c, a fake client, with Members answered from c too:
// pods created during a test are members at once.
func testReads(c client.Reader) reads {
	return reads{Cached: c, Live: c, Members: clientMembers{c}}
}

// clientMembers answers indexGroupMembers by listing a client's pods and
// applying podgroup.IndexByGroup to each.
type clientMembers struct{ c client.Reader }

func (m clientMembers) ByIndex(index, value string) ([]any, error) {
	if index != indexGroupMembers {
		return nil, nil
	}
	ns, _, _ := strings.Cut(value, "/")
	list := &corev1.PodList{}
	if err := m.c.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var out []any
	for i := range list.Items {
		if keys, _ := podgroup.IndexByGroup(&list.Items[i]); slices.Contains(keys, value) {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// TestMembersFromTheIndex: a group's members are its pods in its namespace
// — not another namespace's group of that name, not pods of no group —
// and they are the indexer's own objects, not copies.
func TestMembersFromTheIndex(t *testing.T) {
	idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{indexGroupMembers: podgroup.IndexByGroup})
	pod := func(ns, name, group string) *corev1.Pod {
		w := builders.MakePod().Namespace(ns).Name(name)
		if group != "" {
			w = w.Member(group)
		}
		p := w.Obj()
		p.UID = types.UID(ns + "/" + name)
		return p
	}
	a0, a1 := pod("team-a", "train-0", "train"), pod("team-a", "train-1", "train")
	for _, p := range []*corev1.Pod{a0, a1, pod("team-b", "train-0", "train"), pod("team-a", "loner", ""), pod("team-a", "other-0", "other")} {
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	r := reads{Members: idx}
	got, err := r.members(context.Background(), "team-a", "train")
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(x, y *corev1.Pod) int { return strings.Compare(x.Name, y.Name) })
	if len(got) != 2 || got[0] != a0 || got[1] != a1 {
		t.Fatalf("members of team-a/train = %v, want the indexer's train-0 and train-1 of team-a", names(got))
	}
	if got, _ := r.members(context.Background(), "team-c", "train"); len(got) != 0 {
		t.Errorf("members of team-c/train = %v, want none", names(got))
	}
	if err := idx.Delete(a1); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.members(context.Background(), "team-a", "train"); len(got) != 1 || got[0] != a0 {
		t.Errorf("after train-1 is deleted, members of team-a/train = %v, want train-0", names(got))
	}
}

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out
}
