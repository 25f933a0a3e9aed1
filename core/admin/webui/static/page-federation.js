// Federation, as RabbitMQ's federation management pages show it: each
// link's state on the node that runs it (starting, running, error and
// why) with a restart, and the upstreams (runtime parameters of component
// federation-upstream, RabbitMQ 3.10's keys) with a form that adds one
// and a delete. The links need monitoring and the upstreams policymaker,
// as the API asks, so the page shows each user the part it may read;
// a restart asks policymaker too.

import * as api from "./api.js";
import { h } from "./dom.js";
import { Table } from "./table.js";
import { actionForm, dangerButton } from "./forms.js";

export async function render(ctx) {
  const status = h("div", { hidden: true, id: "federation-msg" });
  const may = api.can();
  ctx.main.append(h("h2", {}, "Federation"), h("p", { className: "muted" },
    "A federated exchange or queue receives messages from its upstreams: exchanges or queues of other brokers. " +
    "A policy with federation-upstream or federation-upstream-set names the upstreams of the exchanges and queues it matches."));
  const links = may.monitor ? linksTable(ctx, may, status) : null;
  const upstreams = may.policies ? upstreamsTable(ctx, status) : null;
  if (links) ctx.main.append(h("h3", {}, "Links"), links.el);
  if (upstreams) ctx.main.append(h("h3", {}, "Upstreams"), upstreams.el);
  ctx.main.append(status);
  if (upstreams) ctx.main.append(await addForm(upstreams));
  const tables = [links, upstreams].filter(Boolean);
  ctx.every(() => tables.forEach((t) => t.reload()));
  return Promise.all(tables.map((t) => t.reload()));
}

// linksTable is /api/federation-links: what each link federates, from
// which upstream, its state and where it runs.
function linksTable(ctx, may, status) {
  const scoped = () => (ctx.vhost() ? api.path("federation-links", ctx.vhost()) : "/api/federation-links");
  const local = (l) => (l.type === "queue" ? l.queue : l.exchange);
  const remote = (l) => (l.type === "queue" ? l.upstream_queue : l.upstream_exchange);
  const t = new Table({
    id: "federation-links", sort: "vhost", empty: "No federation links.",
    nameOf: (l) => [l.vhost, local(l), l.upstream].join(" "),
    fetchAll: () => api.get(scoped()),
    columns: [
      { label: "Type", key: "type", render: (l) => l.type },
      { label: "Virtual host", key: "vhost", render: (l) => l.vhost },
      { label: "Exchange / queue", render: (l) => local(l) },
      { label: "Upstream", key: "upstream", render: (l) => l.upstream + (remote(l) && remote(l) !== local(l) ? " (" + l.type + " " + remote(l) + ")" : "") },
      { label: "URI", key: "uri", render: (l) => l.uri },
      { label: "State", key: "status", render: (l) => h("span", { className: "badge state-" + l.status }, l.status) },
      { label: "Error", render: (l) => l.error || "" },
      { label: "Node", key: "node", render: (l) => l.node },
      { label: "Since", key: "timestamp", render: (l) => l.timestamp },
      { label: "", render: (l) => !may.policies ? "" :
        dangerButton("Restart", "restart-federation-" + l.id, async () => {
          await api.del(api.path("federation-links", "vhost", l.vhost, l.id, l.node, "restart"));
          t.reload();
          return `Federation link ${l.id} (${local(l)} from ${l.upstream}) restarted.`;
        }, status) },
    ],
  });
  return t;
}

// upstreamsTable is the federation-upstream parameters, their URIs
// without passwords: the page is often on a screen others see.
function upstreamsTable(ctx, status) {
  const scoped = () => (ctx.vhost() ? api.path("parameters", "federation-upstream", ctx.vhost()) : api.path("parameters", "federation-upstream"));
  const v = (u, key) => (u.value[key] === undefined ? "" : String(u.value[key]));
  const t = new Table({
    id: "federation-upstreams", sort: "name", empty: "No upstreams.", nameOf: (u) => u.vhost + " " + u.name,
    fetchAll: () => api.get(scoped()),
    columns: [
      { label: "Name", key: "name", render: (u) => u.name },
      { label: "Virtual host", key: "vhost", render: (u) => u.vhost },
      { label: "URI", render: (u) => [].concat(u.value.uri || []).map(hidePassword).join(" ") },
      { label: "Exchange", render: (u) => v(u, "exchange") },
      { label: "Queue", render: (u) => v(u, "queue") },
      { label: "Max hops", render: (u) => v(u, "max-hops") },
      { label: "Expires (ms)", render: (u) => v(u, "expires") },
      { label: "Message TTL (ms)", render: (u) => v(u, "message-ttl") },
      { label: "Prefetch", render: (u) => v(u, "prefetch-count") },
      { label: "Reconnect delay (s)", render: (u) => v(u, "reconnect-delay") },
      { label: "Ack mode", render: (u) => v(u, "ack-mode") },
      { label: "Trust user-id", render: (u) => v(u, "trust-user-id") },
      { label: "", render: (u) => dangerButton("Delete", "delete-upstream-" + u.name, async () => {
        await api.del(api.path("parameters", "federation-upstream", u.vhost, u.name));
        t.reload();
        return `Upstream ${u.name} deleted.`;
      }, status) },
    ],
  });
  return t;
}

// hidePassword masks the password of amqp://user:password@host.
function hidePassword(uri) {
  return String(uri).replace(/^([a-z]+:\/\/[^:@/]*):[^@/]*@/i, "$1:********@");
}

async function addForm(t) {
  const vhosts = await api.get("/api/vhosts");
  return actionForm({
    id: "add-upstream", title: "Add an upstream", submit: "Add upstream",
    fields: [
      { name: "name", label: "Name", required: true },
      { name: "vhost", label: "Virtual host", type: "select", options: vhosts.map((vh) => vh.name) },
      { name: "uri", label: "URI", required: true, placeholder: "amqp://user:password@host", type: "textarea", rows: 1,
        help: "Several, one per line, are tried in turn." },
      { name: "exchange", label: "Exchange", help: "Empty: the federated exchange's own name." },
      { name: "queue", label: "Queue", help: "Empty: the federated queue's own name." },
      { name: "max_hops", label: "Max hops", type: "number", value: "1", min: 1 },
      { name: "expires", label: "Expires (ms)", type: "number", min: 0, help: "How long the upstream keeps its queue while the link is down. Empty: forever." },
      { name: "message_ttl", label: "Message TTL (ms)", type: "number", min: 0, help: "Empty: messages wait upstream for ever." },
      { name: "prefetch", label: "Prefetch count", type: "number", value: "1000", min: 0 },
      { name: "reconnect", label: "Reconnect delay (s)", type: "number", value: "5", min: 0 },
      { name: "ack_mode", label: "Acknowledgement", type: "select", value: "on-confirm",
        options: [["on-confirm", "on confirm"], ["on-publish", "on publish"], ["no-ack", "no ack"]] },
      { name: "trust_user_id", label: "Trust user-id", type: "checkbox" },
    ],
    onSubmit: async (val) => {
      const uris = val.uri.split(/\s+/).filter(Boolean);
      if (!uris.length) throw new Error("URI: at least one is needed");
      const def = { uri: uris.length === 1 ? uris[0] : uris, "ack-mode": val.ack_mode, "trust-user-id": !!val.trust_user_id };
      if (val.exchange) def.exchange = val.exchange;
      if (val.queue) def.queue = val.queue;
      for (const [field, key] of [["max_hops", "max-hops"], ["expires", "expires"], ["message_ttl", "message-ttl"],
        ["prefetch", "prefetch-count"], ["reconnect", "reconnect-delay"]]) {
        if (val[field] !== "") def[key] = Number(val[field]);
      }
      await api.put(api.path("parameters", "federation-upstream", val.vhost, val.name), { value: def });
      t.reload();
      return `Upstream ${val.name} added.`;
    },
  });
}
