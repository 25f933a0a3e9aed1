// The overview: totals, live charts of message rates and queue depths from
// /api/overview's samples (ten minutes in five-second steps, as RabbitMQ's
// UI asks), the node's listeners and the exchange types.

import * as api from "./api.js";
import { h, replace, message, link } from "./dom.js";
import { num, rate } from "./format.js";
import { Chart, countsToRates, levels } from "./chart.js";

// The charts' spans, as RabbitMQ's UI offers them: [age, incr] in seconds.
const RANGES = [["60", "Last minute", 60, 5], ["600", "Last ten minutes", 600, 5], ["3600", "Last hour", 3600, 60]];
const RANGE_KEY = "warren.chart-range";

function history() {
  const r = RANGES.find((x) => x[0] === sessionStorage.getItem(RANGE_KEY)) || RANGES[1];
  const [, , age, incr] = r;
  return `lengths_age=${age}&lengths_incr=${incr}&msg_rates_age=${age}&msg_rates_incr=${incr}`;
}

const RATE_SERIES = [
  ["publish", "Publish"], ["confirm", "Confirm"], ["deliver_get", "Deliver / get"], ["ack", "Ack"],
  ["redeliver", "Redelivered"], ["return_unroutable", "Returned"], ["drop_unroutable", "Dropped"],
];
const DEPTH_SERIES = [["messages", "Total"], ["messages_ready", "Ready"], ["messages_unacknowledged", "Unacked"]];

export async function render(ctx) {
  const totals = h("div", { className: "tiles", id: "totals" });
  const rates = new Chart("chart-rates", "Message rates", "/s");
  const depth = new Chart("chart-depth", "Queued messages", "");
  const node = h("div", { id: "node" });
  const status = h("div", { hidden: true });
  const range = h("select", { id: "chart-range" }, RANGES.map(([v, label]) => h("option", { value: v }, label)));
  range.value = sessionStorage.getItem(RANGE_KEY) || "600";
  range.addEventListener("change", () => {
    sessionStorage.setItem(RANGE_KEY, range.value);
    refresh();
  });
  ctx.main.append(h("div", { className: "titlebar" }, h("h2", {}, "Overview"), h("label", {}, "Charts show ", range)),
    status, totals, h("div", { className: "charts" }, depth.el, rates.el), node);

  const refresh = async () => {
    let o;
    try {
      o = await api.get("/api/overview?" + history());
    } catch (e) {
      message(status, "error", e.message);
      return;
    }
    message(status, "", "");
    const ot = o.object_totals || {}, qt = o.queue_totals || {}, ms = o.message_stats || {};
    replace(totals,
      tile("Connections", ot.connections, "connections"), tile("Channels", ot.channels, "channels"),
      tile("Exchanges", ot.exchanges, "exchanges"), tile("Queues", ot.queues, "queues"),
      tile("Consumers", ot.consumers, "consumers"), tile("Messages", qt.messages), tile("Ready", qt.messages_ready),
      tile("Unacked", qt.messages_unacknowledged),
      tile("Publish", rate((ms.publish_details || {}).rate || 0)), tile("Deliver / get", rate((ms.deliver_get_details || {}).rate || 0)));
    depth.draw(DEPTH_SERIES.map(([k, label]) => ({ label, points: levels((qt[k + "_details"] || {}).samples) })));
    rates.draw(RATE_SERIES.map(([k, label]) => ({ label, points: countsToRates((ms[k + "_details"] || {}).samples) })));
    const alarm = o.alarm && o.alarm.raised
      ? h("p", { className: "msg msg-error", id: "alarm" }, "Resource alarm: " + (o.alarm.reason || "raised") + " — publishers are blocked.")
      : null;
    replace(node,
      alarm,
      h("h3", {}, "Node"),
      h("table", { className: "props" }, h("tbody", {},
        prop("Product", `${o.product_name || "Warren"} ${o.product_version || ""}`),
        prop("Node", link(o.node, "node", o.node)), prop("Cluster", o.cluster_name))),
      h("h3", {}, "Listeners"),
      h("table", { className: "list", id: "listeners" },
        h("thead", {}, h("tr", {}, h("th", {}, "Protocol"), h("th", {}, "Address"), h("th", {}, "Port"))),
        h("tbody", {}, (o.listeners || []).map((l) => h("tr", {}, h("td", {}, l.protocol), h("td", {}, l.ip_address), h("td", {}, String(l.port)))))),
      h("h3", {}, "Exchange types"),
      h("ul", { className: "types" }, (o.exchange_types || []).map((t) => h("li", {}, h("b", {}, t.name), " — ", t.description))));
    ctx.main.dataset.loaded = "true";
  };
  await refresh();
  ctx.every(refresh);
}

function tile(label, value, link) {
  const v = typeof value === "number" ? num(value) : value ?? "";
  const body = [h("span", { className: "value" }, v), h("span", { className: "label" }, label)];
  return link ? h("a", { className: "tile", href: "#/" + link }, body) : h("div", { className: "tile" }, body);
}

export function prop(label, value) {
  return h("tr", {}, h("th", {}, label), h("td", {}, value instanceof Node ? value : String(value ?? "")));
}
