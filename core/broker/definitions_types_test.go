package broker

import (
	"context"
	"testing"
)

// A RabbitMQ export with a quorum queue and a stream in a vhost the same
// document creates imports whole (it was refused: the new vhost was
// checked against a scratch vhost without a store, which the quorum type
// took for a broker that cannot keep one), and exports again as it came.
func TestDefinitionsQuorumQueueAndStreamInANewVHost(t *testing.T) {
	b := testBroker(t, t.TempDir())
	doc := `{"rabbit_version":"3.10.8","vhosts":[{"name":"nv"}],"queues":[
	 {"name":"qq","vhost":"nv","durable":true,"auto_delete":false,"type":"quorum","arguments":{"x-queue-type":"quorum","x-delivery-limit":5}},
	 {"name":"st","vhost":"nv","durable":true,"auto_delete":false,"type":"stream","arguments":{"x-queue-type":"stream","x-max-age":"1D"}}]}`
	if err := b.ImportDefinitions(context.Background(), []byte(doc), ""); err != nil {
		t.Fatal(err)
	}
	v, ok := b.VHost("nv")
	if !ok {
		t.Fatal("vhost nv not made")
	}
	for name, want := range map[string]string{"qq": "quorum", "st": "stream"} {
		if info, ok := v.QueueInfo(name); !ok || info.Type != want {
			t.Errorf("%s: %+v, %v; want a %s", name, info.QueueEntry, ok, want)
		}
	}
	got := map[string]string{}
	for _, q := range b.ExportDefinitions().Queues {
		got[q.Name], _ = q.Arguments["x-queue-type"].(string)
	}
	if got["qq"] != "quorum" || got["st"] != "stream" {
		t.Errorf("exported %v", got)
	}
	// A flag the type refuses is still refused before anything is made.
	bad := `{"vhosts":[{"name":"nv2"}],"queues":[{"name":"qq","vhost":"nv2","durable":false,"auto_delete":false,"arguments":{"x-queue-type":"quorum"}}]}`
	if err := b.ImportDefinitions(context.Background(), []byte(bad), ""); err == nil {
		t.Fatal("a transient quorum queue was taken")
	}
	if _, ok := b.VHost("nv2"); ok {
		t.Fatal("a refused import made its vhost")
	}
}
