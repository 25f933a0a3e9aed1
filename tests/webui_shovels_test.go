package tests

import (
	"fmt"
	"strings"
	"testing"
)

// The web UI's Shovels page declares a shovel with its form, shows it
// running with where it moves messages from and to, restarts it and
// deletes it, as RabbitMQ's shovel management pages do.
func TestWebUIShovels(t *testing.T) {
	br := startBrowser(t)
	m := startWarrenMgmt(t)
	_, ch := m.channel()
	if _, err := ch.QueueDeclare("ui-from", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		publish(t, ch, "", "ui-from", body(fmt.Sprint(i)))
	}
	login(t, br, m.base)
	br.goTo(t, "shovels")
	br.do(t, "add a shovel",
		waitVisible(`#shovels[data-state="loaded"]`),
		sendKeys(`#add-shovel-name`, "ui-shovel"),
		setValue(`#add-shovel-vhost`, m.vhost),
		setValue(`#add-shovel-src_uri`, "amqp:///"+m.v()),
		sendKeys(`#add-shovel-src_name`, "ui-from"),
		setValue(`#add-shovel-dest_uri`, "amqp:///"+m.v()),
		sendKeys(`#add-shovel-dest_name`, "ui-to"),
		click(`#add-shovel-submit`),
		waitVisible(`#add-shovel-msg[data-kind="ok"]`),
		pollJS(`document.querySelector("#shovels tbody").textContent.includes("running")`),
	)
	row := br.text(t, `#shovels tbody`)
	for _, want := range []string{"ui-shovel", m.vhost, "queue ui-from", "queue ui-to", "amqp:///"} {
		if !strings.Contains(row, want) {
			t.Errorf("the shovel's row %q lacks %q", row, want)
		}
	}
	waitCount(t, ch, "ui-to", 10)
	br.do(t, "restart the shovel",
		clickFound(`#restart-shovel-ui-shovel`),
		clickFound(`#restart-shovel-ui-shovel`),
		waitVisible(`#shovels-msg[data-kind="ok"]`),
		pollJS(`document.querySelector("#shovels tbody").textContent.includes("running")`),
	)
	br.do(t, "delete the shovel",
		clickFound(`#delete-shovel-ui-shovel`),
		clickFound(`#delete-shovel-ui-shovel`),
		pollJS(`document.querySelector("#shovels tbody").textContent.includes("No shovels")`),
	)
	m.expectNotFound("GET", "/api/parameters/shovel/"+m.v()+"/ui-shovel")
	if errs := br.pageErrors(); len(errs) > 0 {
		t.Errorf("the page reported errors:\n%s", strings.Join(errs, "\n"))
	}
}
