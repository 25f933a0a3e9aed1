// Shovels, as RabbitMQ's shovel management pages show them: each shovel's
// state on the node that runs it (starting, running, terminated and why),
// restart and delete, and a form that declares one (a runtime parameter
// of component shovel, RabbitMQ 3.10's keys). Restart and delete ask
// policymaker, as the API does.

import * as api from "./api.js";
import { h } from "./dom.js";
import { Table } from "./table.js";
import { actionForm, dangerButton } from "./forms.js";

export async function render(ctx) {
  const status = h("div", { hidden: true, id: "shovels-msg" });
  const may = api.can();
  const scoped = () => (ctx.vhost() ? api.path("shovels", ctx.vhost()) : "/api/shovels");
  const endpoint = (queue, exchange, key) => (queue ? "queue " + queue : exchange !== undefined ? "exchange " + (exchange || "(default)") + (key ? " / " + key : "") : "");
  const t = new Table({
    id: "shovels", sort: "name", empty: "No shovels.", nameOf: (s) => s.vhost + " " + s.name,
    fetchAll: () => api.get(scoped()),
    columns: [
      { label: "Name", key: "name", render: (s) => s.name },
      { label: "Virtual host", key: "vhost", render: (s) => s.vhost },
      { label: "State", key: "state", render: (s) => {
        const state = s.blocked_status === "blocked" ? "blocked" : s.state;
        return h("span", { className: "badge state-" + state }, state);
      } },
      { label: "Source", render: (s) => [s.src_uri, endpoint(s.src_queue, s.src_exchange, s.src_exchange_key)].filter(Boolean).join(" ") },
      { label: "Destination", render: (s) => [s.dest_uri, endpoint(s.dest_queue, s.dest_exchange, s.dest_exchange_key)].filter(Boolean).join(" ") },
      { label: "Reason", key: "reason", render: (s) => s.reason || "" },
      { label: "Node", key: "node", render: (s) => s.node },
      { label: "Since", key: "timestamp", render: (s) => s.timestamp },
      { label: "", render: (s) => !may.policies ? "" : h("span", {},
        dangerButton("Restart", "restart-shovel-" + s.name, async () => {
          await api.del(api.path("shovels", "vhost", s.vhost, s.name, "restart"));
          t.reload();
          return `Shovel ${s.name} restarted.`;
        }, status), " ",
        dangerButton("Delete", "delete-shovel-" + s.name, async () => {
          await api.del(api.path("shovels", "vhost", s.vhost, s.name));
          t.reload();
          return `Shovel ${s.name} deleted.`;
        }, status)) },
    ],
  });
  ctx.main.append(h("h2", {}, "Shovels"), h("p", { className: "muted" },
    "Shovels move messages from a queue or exchange of one broker to another. A URI with no host (amqp://, amqp:///vhost) is this broker."),
  t.el, status);
  if (may.policies) ctx.main.append(await addForm(t));
  ctx.every(() => t.reload());
  return t.reload();
}

async function addForm(t) {
  const vhosts = await api.get("/api/vhosts");
  return actionForm({
    id: "add-shovel", title: "Add a shovel", submit: "Add shovel",
    fields: [
      { name: "name", label: "Name", required: true },
      { name: "vhost", label: "Virtual host", type: "select", options: vhosts.map((v) => v.name) },
      { name: "src_uri", label: "Source URI", value: "amqp://", help: "Several, one per line, are tried in turn.", type: "textarea", rows: 1 },
      { name: "src_kind", label: "Source", type: "select", options: [["queue", "Queue"], ["exchange", "Exchange"]] },
      { name: "src_name", label: "Source queue or exchange", required: true },
      { name: "src_key", label: "Routing key (exchange source)" },
      { name: "dest_uri", label: "Destination URI", value: "amqp://", type: "textarea", rows: 1 },
      { name: "dest_kind", label: "Destination", type: "select", options: [["queue", "Queue"], ["exchange", "Exchange"]] },
      { name: "dest_name", label: "Destination queue or exchange", help: "Empty: the message's own exchange." },
      { name: "dest_key", label: "Routing key (exchange destination)", help: "Empty: the message's own." },
      { name: "ack_mode", label: "Acknowledgement", type: "select", value: "on-confirm",
        options: [["on-confirm", "on confirm"], ["on-publish", "on publish"], ["no-ack", "no ack"]] },
      { name: "prefetch", label: "Prefetch count", type: "number", value: "1000", min: 0 },
      { name: "reconnect", label: "Reconnect delay (s)", type: "number", value: "1", min: 0 },
      { name: "delete_after", label: "Delete after", type: "select", value: "never",
        options: [["never", "never"], ["queue-length", "the queue's length at start"]] },
      { name: "forward_headers", label: "Add forwarding headers", type: "checkbox" },
    ],
    onSubmit: async (v) => {
      const uris = (s) => {
        const list = s.split(/\s+/).filter(Boolean);
        return list.length === 1 ? list[0] : list;
      };
      const def = {
        "src-uri": uris(v.src_uri), "dest-uri": uris(v.dest_uri), "ack-mode": v.ack_mode,
        "src-prefetch-count": Number(v.prefetch), "reconnect-delay": Number(v.reconnect), "src-delete-after": v.delete_after,
      };
      if (v.src_kind === "queue") def["src-queue"] = v.src_name;
      else {
        def["src-exchange"] = v.src_name;
        def["src-exchange-key"] = v.src_key;
      }
      if (v.dest_kind === "queue" && v.dest_name) def["dest-queue"] = v.dest_name;
      if (v.dest_kind === "exchange" && v.dest_name) def["dest-exchange"] = v.dest_name;
      if (v.dest_kind === "exchange" && v.dest_key) def["dest-exchange-key"] = v.dest_key;
      if (v.forward_headers) def["dest-add-forward-headers"] = true;
      await api.put(api.path("parameters", "shovel", v.vhost, v.name), { value: def });
      t.reload();
      return `Shovel ${v.name} added.`;
    },
  });
}
