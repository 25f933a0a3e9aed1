// One queue: its figures, consumers, bindings, and the operator's actions
// (publish to it, get messages, purge, delete).

import * as api from "./api.js";
import { h, replace, message, route } from "./dom.js";
import { num, json, bytes, statRate, flags } from "./format.js";
import { actionForm, dangerButton } from "./forms.js";
import { bindingsTable, bindForm, publishForm, section } from "./bindings.js";
import { prop } from "./page-overview.js";

export async function render(ctx) {
  const [vhost, name] = ctx.params;
  const qpath = api.path("queues", vhost, name);
  const status = h("div", { hidden: true, id: "queue-msg" });
  const details = section("Details", "queue-details");
  const consumers = section("Consumers", "queue-consumers");
  const bindings = section("Bindings", "queue-bindings");

  const refresh = async () => {
    const [q, bs] = await Promise.all([api.get(qpath), api.get(qpath + "/bindings")]);
    const ms = q.message_stats || {};
    details.set(h("table", { className: "props" }, h("tbody", {},
      prop("Virtual host", q.vhost), prop("Type", q.type), prop("Features", flags(q)), prop("State", q.state),
      prop("Policy", q.policy || ""), prop("Arguments", json(q.arguments)),
      prop("Effective policy", json(q.effective_policy_definition)),
      prop("Ready", num(q.messages_ready)), prop("Unacked", num(q.messages_unacknowledged)),
      prop("Total", h("span", { id: "queue-messages" }, num(q.messages))),
      prop("Bytes", bytes(q.message_bytes)), prop("Consumers", num(q.consumers)),
      prop("Incoming", statRate(ms, "publish")), prop("Deliver / get", statRate(ms, "deliver_get")), prop("Ack", statRate(ms, "ack")))));
    const cs = q.consumer_details || [];
    consumers.set(cs.length
      ? h("table", { className: "list" },
        h("thead", {}, h("tr", {}, ["Channel", "Consumer tag", "Ack required", "Prefetch", "Arguments"].map((x) => h("th", {}, x)))),
        h("tbody", {}, cs.map((c) => h("tr", {}, h("td", {}, (c.channel_details || {}).name || ""), h("td", {}, c.consumer_tag),
          h("td", {}, c.ack_required ? "yes" : "no"), h("td", {}, num(c.prefetch_count)), h("td", {}, json(c.arguments))))))
      : h("p", { className: "muted" }, "No consumers."));
    bindings.set(bindingsTable("queue-bindings-table", bs, () => refresh().catch(showError)));
    ctx.main.dataset.loaded = "true";
  };
  const showError = (e) => message(status, "error", e.message);

  ctx.main.append(h("h2", {}, "Queue ", h("span", { className: "name", id: "queue-name" }, name)), status,
    details.el, consumers.el, bindings.el,
    bindForm("queue-bind", vhost, { queue: name }, () => refresh().catch(showError)),
    publishForm("queue-publish", vhost, "", name),
    getForm(qpath),
    actions(qpath, vhost, () => refresh().catch(showError)));
  await refresh();
  ctx.every(() => refresh().catch(showError));
}

const ACKMODES = [
  ["ack_requeue_true", "Nack message requeue true"],
  ["ack_requeue_false", "Automatic ack"],
  ["reject_requeue_true", "Reject requeue true"],
  ["reject_requeue_false", "Reject requeue false"],
];

function getForm(qpath) {
  const out = h("div", { id: "get-results" });
  const form = actionForm({
    id: "queue-get", title: "Get messages", submit: "Get message(s)",
    fields: [
      { name: "ackmode", label: "Ack mode", type: "select", options: ACKMODES },
      { name: "encoding", label: "Encoding", type: "select", options: [["auto", "Automatic string/base64"], ["base64", "base64"]] },
      { name: "count", label: "Messages", type: "number", value: "1", min: 1 },
      { name: "truncate", label: "Truncate at (bytes)", type: "number", value: "50000", min: 1 },
    ],
    onSubmit: async (v) => {
      const body = { count: Number(v.count) || 1, ackmode: v.ackmode, encoding: v.encoding };
      if (v.truncate) body.truncate = Number(v.truncate);
      const msgs = await api.post(qpath + "/get", body);
      replace(out, msgs.map((m, i) => h("div", { className: "message" },
        h("h4", {}, `Message ${i + 1}`),
        h("table", { className: "props" }, h("tbody", {},
          prop("Exchange", m.exchange === "" ? "(AMQP default)" : m.exchange), prop("Routing key", m.routing_key),
          prop("Redelivered", m.redelivered ? "yes" : "no"), prop("Remaining in queue", num(m.message_count)),
          prop("Properties", json(m.properties)),
          prop("Payload", h("span", {}, `${num(m.payload_bytes)} bytes, encoding ${m.payload_encoding}`)))),
        h("pre", { className: "payload" }, m.payload))));
      return msgs.length ? `Got ${msgs.length} message(s).` : "Queue is empty.";
    },
  });
  form.append(out);
  return form;
}

function actions(qpath, vhost, onChange) {
  const status = h("div", { hidden: true, id: "queue-actions-msg" });
  const ifEmpty = h("input", { type: "checkbox", id: "delete-if-empty" });
  const ifUnused = h("input", { type: "checkbox", id: "delete-if-unused" });
  return h("section", { className: "action" }, h("h3", {}, "Purge or delete"),
    h("div", { className: "buttons" },
      dangerButton("Purge messages", "queue-purge", async () => {
        await api.del(qpath + "/contents");
        onChange();
        return "Queue purged.";
      }, status),
      dangerButton("Delete queue", "queue-delete", async () => {
        await api.del(api.query(qpath, { "if-empty": ifEmpty.checked ? "true" : "", "if-unused": ifUnused.checked ? "true" : "" }));
        location.hash = route("queues");
        return "Queue deleted.";
      }, status),
      h("label", { className: "check" }, ifEmpty, " only if empty"),
      h("label", { className: "check" }, ifUnused, " only if unused")),
    status);
}
