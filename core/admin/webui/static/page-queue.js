// One queue: its figures, consumers, bindings, and the operator's actions
// (publish to it, get messages, purge, delete).

import * as api from "./api.js";
import { h, replace, message, route } from "./dom.js";
import { num, json, bytes, statRate, flags } from "./format.js";
import { actionForm, dangerButton } from "./forms.js";
import { bindingsTable, bindForm, publishForm, section } from "./bindings.js";
import { prop } from "./page-overview.js";
import { Chart } from "./chart.js";

// The API keeps history for the overview only, so a queue's charts are
// the figures this page has read since it opened, one point a refresh.
const MAX_POINTS = 120;

export async function render(ctx) {
  const [vhost, name] = ctx.params;
  const qpath = api.path("queues", vhost, name);
  const status = h("div", { hidden: true, id: "queue-msg" });
  const details = section("Details", "queue-details");
  const consumers = section("Consumers", "queue-consumers");
  const bindings = section("Bindings", "queue-bindings");
  const depthChart = new Chart("queue-chart-depth", "Queued messages (while this page is open)", "");
  const rateChart = new Chart("queue-chart-rates", "Message rates (while this page is open)", "/s");
  const series = { ready: [], unacked: [], publish: [], deliver: [], ack: [] };
  const record = (q) => {
    const t = Date.now();
    const ms = q.message_stats || {};
    const rate = (k) => (ms[k + "_details"] || {}).rate || 0;
    const add = (k, v) => {
      series[k].push({ t, v });
      if (series[k].length > MAX_POINTS) series[k].shift();
    };
    add("ready", q.messages_ready || 0);
    add("unacked", q.messages_unacknowledged || 0);
    add("publish", rate("publish"));
    add("deliver", rate("deliver_get"));
    add("ack", rate("ack"));
    depthChart.draw([{ label: "Ready", points: series.ready }, { label: "Unacked", points: series.unacked }]);
    rateChart.draw([{ label: "Incoming", points: series.publish }, { label: "Deliver / get", points: series.deliver },
      { label: "Ack", points: series.ack }]);
  };

  const refresh = async () => {
    const [q, bs] = await Promise.all([api.get(qpath), api.get(qpath + "/bindings")]);
    const ms = q.message_stats || {};
    record(q);
    details.set(h("table", { className: "props" }, h("tbody", {},
      prop("Virtual host", q.vhost), prop("Type", q.type), prop("Features", flags(q)), prop("State", q.state),
      prop("Policy", q.policy || ""), prop("Arguments", json(q.arguments)),
      prop("Effective policy", json(q.effective_policy_definition)),
      prop("Ready", num(q.messages_ready)), prop("Unacked", num(q.messages_unacknowledged)),
      prop("Total", h("span", { id: "queue-messages" }, num(q.messages))),
      prop("Bytes", bytes(q.message_bytes)),
      prop("In memory", h("span", { id: "queue-memory" }, q.memory === undefined ? "in its group's members" : bytes(q.memory))),
      prop("Consumers", num(q.consumers)),
      prop("Consumer utilisation", h("span", { id: "queue-utilisation" },
        q.consumer_utilisation === undefined ? "not measured for this queue type" : Math.round(100 * q.consumer_utilisation) + "%")),
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
    details.el, h("div", { className: "charts" }, depthChart.el, rateChart.el), consumers.el, bindings.el,
    bindForm("queue-bind", vhost, { queue: name }, () => refresh().catch(showError)),
    publishForm("queue-publish", vhost, "", name, () => refresh().catch(showError)),
    getForm(qpath, () => refresh().catch(showError)),
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

function getForm(qpath, onDone) {
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
      onDone();
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
