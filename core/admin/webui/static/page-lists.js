// The listing pages: connections, channels, exchanges, queues, consumers.
// The first four are paged by the API; consumers are few enough to page in
// the tab (the API answers them as one array).

import * as api from "./api.js";
import { h, link, message } from "./dom.js";
import { num, statRate, flags, json, time } from "./format.js";
import { Table, serverPage } from "./table.js";
import { actionForm, dangerButton, parseJSONField } from "./forms.js";

// listPath is /api/KIND or /api/KIND/VHOST when the tab is limited to one.
const listPath = (ctx, kind) => () => (ctx.vhost() ? api.path(kind, ctx.vhost()) : api.path(kind));

function mount(ctx, title, table, ...extra) {
  ctx.main.append(h("h2", {}, title), table.el, ...extra);
  ctx.every(() => table.reload());
  return table.reload();
}

const vhostCol = { label: "Virtual host", key: "vhost", render: (x) => x.vhost };

export function connections(ctx) {
  const status = h("div", { hidden: true, id: "connections-msg" });
  const t = new Table({
    id: "connections", sort: "name", empty: "No connections.",
    fetchPage: serverPage(api, listPath(ctx, "connections")),
    columns: [
      { label: "Name", key: "name", render: (c) => link(c.name, "connection", c.name) },
      vhostCol,
      { label: "User", key: "user", render: (c) => c.user },
      { label: "State", key: "state", render: (c) => c.state },
      { label: "Protocol", key: "protocol", render: (c) => c.protocol + (c.ssl ? " (TLS)" : "") },
      { label: "Channels", key: "channels", className: "num", render: (c) => num(c.channels) },
      { label: "Client", render: (c) => clientName(c.client_properties) },
      { label: "Connected", key: "connected_at", render: (c) => time(c.connected_at) },
      { label: "Publish", key: "message_stats.publish_details.rate", className: "num", render: (c) => statRate(c.message_stats, "publish") },
      { label: "", render: (c) => dangerButton("Close", "", async () => {
        await api.del(api.path("connections", c.name), { headers: { "X-Reason": "Closed via the Warren management UI" } });
        t.reload();
        return "Closed " + c.name + ".";
      }, status) },
    ],
  });
  return mount(ctx, "Connections", t, status);
}

function clientName(p) {
  if (!p) return "";
  return [p.product, p.version, p.platform].filter((x) => typeof x === "string").join(" ");
}

export function channels(ctx) {
  const t = new Table({
    id: "channels", sort: "name", empty: "No channels.",
    fetchPage: serverPage(api, listPath(ctx, "channels")),
    columns: [
      { label: "Channel", key: "name", render: (c) => link(c.name, "channel", c.name) },
      vhostCol,
      { label: "User", key: "user", render: (c) => c.user },
      { label: "Mode", render: (c) => [c.confirm ? "Confirm" : "", c.transactional ? "Tx" : ""].filter(Boolean).join(" ") },
      { label: "State", key: "state", render: (c) => c.state },
      { label: "Prefetch", key: "prefetch_count", className: "num", render: (c) => num(c.prefetch_count) + (c.global_prefetch_count ? ` (global ${c.global_prefetch_count})` : "") },
      { label: "Unacked", key: "messages_unacknowledged", className: "num", render: (c) => num(c.messages_unacknowledged) },
      { label: "Consumers", key: "consumer_count", className: "num", render: (c) => num(c.consumer_count) },
      { label: "Publish", key: "message_stats.publish_details.rate", className: "num", render: (c) => statRate(c.message_stats, "publish") },
      { label: "Deliver / get", key: "message_stats.deliver_get_details.rate", className: "num", render: (c) => statRate(c.message_stats, "deliver_get") },
      { label: "Ack", key: "message_stats.ack_details.rate", className: "num", render: (c) => statRate(c.message_stats, "ack") },
    ],
  });
  return mount(ctx, "Channels", t);
}

export const exchangeName = (n) => (n === "" ? "(AMQP default)" : n);

export async function exchanges(ctx) {
  const t = new Table({
    id: "exchanges", sort: "name", empty: "No exchanges.",
    fetchPage: serverPage(api, listPath(ctx, "exchanges")),
    columns: [
      vhostCol,
      { label: "Name", key: "name", render: (x) => link(exchangeName(x.name), "exchange", x.vhost, x.name) },
      { label: "Type", key: "type", render: (x) => x.type },
      { label: "Features", render: flags },
      { label: "Policy", key: "policy", render: (x) => x.policy || "" },
      { label: "In", key: "message_stats.publish_in_details.rate", className: "num", render: (x) => statRate(x.message_stats, "publish_in") },
      { label: "Out", key: "message_stats.publish_out_details.rate", className: "num", render: (x) => statRate(x.message_stats, "publish_out") },
    ],
  });
  let types = ["direct", "fanout", "topic", "headers"];
  try {
    const o = await api.get("/api/overview");
    types = (o.exchange_types || []).map((x) => x.name);
  } catch { /* keep the built-in four */ }
  const form = actionForm({
    id: "add-exchange", title: "Add an exchange", submit: "Add exchange",
    fields: [
      { name: "vhost", label: "Virtual host", value: ctx.vhost() || "/" },
      { name: "name", label: "Name", required: true },
      { name: "type", label: "Type", type: "select", options: types },
      { name: "durable", label: "Durable", type: "checkbox", value: true },
      { name: "auto_delete", label: "Auto-delete", type: "checkbox" },
      { name: "internal", label: "Internal", type: "checkbox" },
      { name: "arguments", label: "Arguments (JSON)", type: "textarea", placeholder: '{"alternate-exchange": "unrouted"}' },
    ],
    onSubmit: async (v) => {
      const body = { type: v.type, durable: v.durable, auto_delete: v.auto_delete, internal: v.internal, arguments: parseJSONField("Arguments", v.arguments) };
      await api.put(api.path("exchanges", v.vhost, v.name), body);
      t.reload();
      return `Exchange ${v.name} declared.`;
    },
  });
  return mount(ctx, "Exchanges", t, form);
}

export function queues(ctx) {
  const t = new Table({
    id: "queues", sort: "name", empty: "No queues.",
    fetchPage: serverPage(api, listPath(ctx, "queues")),
    columns: [
      vhostCol,
      { label: "Name", key: "name", render: (q) => link(q.name, "queue", q.vhost, q.name) },
      { label: "Type", key: "type", render: (q) => q.type },
      { label: "Features", render: flags },
      { label: "Policy", key: "policy", render: (q) => q.policy || "" },
      { label: "State", key: "state", render: (q) => q.state },
      { label: "Ready", key: "messages_ready", className: "num", render: (q) => num(q.messages_ready) },
      { label: "Unacked", key: "messages_unacknowledged", className: "num", render: (q) => num(q.messages_unacknowledged) },
      { label: "Total", key: "messages", className: "num", render: (q) => num(q.messages) },
      { label: "Consumers", key: "consumers", className: "num", render: (q) => num(q.consumers) },
      { label: "Incoming", key: "message_stats.publish_details.rate", className: "num", render: (q) => statRate(q.message_stats, "publish") },
      { label: "Deliver / get", key: "message_stats.deliver_get_details.rate", className: "num", render: (q) => statRate(q.message_stats, "deliver_get") },
      { label: "Ack", key: "message_stats.ack_details.rate", className: "num", render: (q) => statRate(q.message_stats, "ack") },
    ],
  });
  const form = actionForm({
    id: "add-queue", title: "Add a queue", submit: "Add queue",
    fields: [
      { name: "vhost", label: "Virtual host", value: ctx.vhost() || "/" },
      { name: "name", label: "Name", required: true },
      { name: "durable", label: "Durable", type: "checkbox", value: true },
      { name: "auto_delete", label: "Auto-delete", type: "checkbox" },
      { name: "arguments", label: "Arguments (JSON)", type: "textarea", placeholder: '{"x-max-length": 1000}' },
    ],
    onSubmit: async (v) => {
      await api.put(api.path("queues", v.vhost, v.name), { durable: v.durable, auto_delete: v.auto_delete, arguments: parseJSONField("Arguments", v.arguments) });
      t.reload();
      return `Queue ${v.name} declared.`;
    },
  });
  return mount(ctx, "Queues", t, form);
}

export function consumers(ctx) {
  const t = new Table({
    id: "consumers", sort: "queue.name", empty: "No consumers.",
    nameOf: (c) => (c.queue && c.queue.name) || "",
    fetchAll: () => api.get(ctx.vhost() ? api.path("consumers", ctx.vhost()) : api.path("consumers")),
    columns: [
      { label: "Virtual host", key: "queue.vhost", render: (c) => c.queue.vhost },
      { label: "Queue", key: "queue.name", render: (c) => link(c.queue.name, "queue", c.queue.vhost, c.queue.name) },
      { label: "Channel", key: "channel_details.name", render: (c) => (c.channel_details || {}).name || "" },
      { label: "Consumer tag", key: "consumer_tag", render: (c) => c.consumer_tag },
      { label: "Ack required", key: "ack_required", render: (c) => (c.ack_required ? "yes" : "no") },
      { label: "Exclusive", key: "exclusive", render: (c) => (c.exclusive ? "yes" : "no") },
      { label: "Prefetch", key: "prefetch_count", className: "num", render: (c) => num(c.prefetch_count) },
      { label: "Active", key: "active", render: (c) => (c.activity_status || (c.active ? "up" : "waiting")) },
      { label: "Arguments", render: (c) => json(c.arguments) },
    ],
  });
  return mount(ctx, "Consumers", t);
}

// streams: the stream protocol's connections, publishers and consumers,
// as RabbitMQ's stream management plugin shows them (/api/stream/...).
export async function streams(ctx) {
  const scoped = (kind) => () => (ctx.vhost() ? api.path("stream", kind, ctx.vhost()) : api.path("stream", kind));
  const status = h("div", { hidden: true, id: "stream-connections-msg" });
  const conns = new Table({
    id: "stream-connections", sort: "name", empty: "No stream connections.",
    fetchPage: serverPage(api, scoped("connections")),
    columns: [
      { label: "Name", key: "name", render: (c) => c.name },
      vhostCol,
      { label: "User", key: "user", render: (c) => c.user },
      { label: "State", key: "state", render: (c) => c.state },
      { label: "TLS", key: "ssl", render: (c) => (c.ssl ? "yes" : "no") },
      { label: "Client", render: (c) => clientName(c.client_properties) },
      { label: "From client", key: "recv_oct", className: "num", render: (c) => num(c.recv_oct) },
      { label: "To client", key: "send_oct", className: "num", render: (c) => num(c.send_oct) },
      { label: "Heartbeat", key: "timeout", className: "num", render: (c) => num(c.timeout) },
      { label: "Connected", key: "connected_at", render: (c) => time(c.connected_at) },
      { label: "", render: (c) => dangerButton("Close", "", async () => {
        await api.del(api.path("stream", "connections", c.vhost, c.name), { headers: { "X-Reason": "Closed via the Warren management UI" } });
        conns.reload();
        return "Closed " + c.name + ".";
      }, status) },
    ],
  });
  const connCol = { label: "Connection", key: "connection_details.name", render: (x) => x.connection_details.name };
  const streamCol = { label: "Stream", key: "queue.name", render: (x) => link(x.queue.name, "queue", x.queue.vhost, x.queue.name) };
  const pubs = new Table({
    id: "stream-publishers", sort: "connection_details.name", empty: "No stream publishers.",
    nameOf: (p) => p.connection_details.name,
    fetchAll: () => api.get(scoped("publishers")()),
    columns: [
      connCol,
      { label: "ID", key: "publisher_id", className: "num", render: (p) => num(p.publisher_id) },
      { label: "Reference", key: "reference", render: (p) => p.reference },
      streamCol,
      { label: "Published", key: "published", className: "num", render: (p) => num(p.published) },
      { label: "Confirmed", key: "confirmed", className: "num", render: (p) => num(p.confirmed) },
      { label: "Errored", key: "errored", className: "num", render: (p) => num(p.errored) },
    ],
  });
  const cons = new Table({
    id: "stream-consumers", sort: "connection_details.name", empty: "No stream consumers.",
    nameOf: (k) => k.connection_details.name,
    fetchAll: () => api.get(scoped("consumers")()),
    columns: [
      connCol,
      { label: "Subscription ID", key: "subscription_id", className: "num", render: (k) => num(k.subscription_id) },
      streamCol,
      { label: "Consumed", key: "consumed", className: "num", render: (k) => num(k.consumed) },
      { label: "Offset", key: "offset", className: "num", render: (k) => num(k.offset) },
      { label: "Offset lag", key: "offset_lag", className: "num", render: (k) => num(k.offset_lag) },
      { label: "Credits", key: "credits", className: "num", render: (k) => num(k.credits) },
      { label: "Status", key: "activity_status", render: (k) => k.activity_status },
    ],
  });
  ctx.main.append(h("h2", {}, "Stream connections"), conns.el, status,
    h("h2", {}, "Stream publishers"), pubs.el, h("h2", {}, "Stream consumers"), cons.el);
  ctx.every(() => Promise.all([conns.reload(), pubs.reload(), cons.reload()]));
  return Promise.all([conns.reload(), pubs.reload(), cons.reload()]);
}
