// Detail pages: one node (memory and where it goes, descriptors and
// sockets against their limits, disk, the store), one connection (its
// figures, client, channels; close it), one channel (its figures and
// consumers), one user (tags, permissions, topic permissions, limits) and
// one virtual host (its figures, description, limits, who may use it). The
// lists link to them; each refreshes while it is open.

import * as api from "./api.js";
import { h, link, message, route } from "./dom.js";
import { num, json, time, statRate, bytes } from "./format.js";
import { dangerButton } from "./forms.js";
import { prop } from "./page-overview.js";
import { section } from "./bindings.js";

// table is a small list of rows; cells are the row's values.
function table(id, head, rows, empty) {
  if (rows.length === 0) return h("p", { className: "muted", id }, empty);
  return h("table", { className: "list", id },
    h("thead", {}, h("tr", {}, head.map((x) => h("th", {}, x)))),
    h("tbody", {}, rows.map((cells) => h("tr", {}, cells.map((c) => h("td", {}, c instanceof Node ? c : String(c ?? "")))))));
}

// mount shows a detail page and refreshes it every interval.
async function mount(ctx, title, name, status, sections, refresh) {
  const showError = (e) => message(status, "error", e.message);
  ctx.main.append(h("h2", {}, title + " ", h("span", { className: "name", id: "detail-name" }, name)), status,
    ...sections);
  await refresh();
  ctx.main.dataset.loaded = "true";
  ctx.every(() => refresh().catch(showError));
}

export async function connection(ctx) {
  const [name] = ctx.params;
  const cpath = api.path("connections", name);
  const status = h("div", { hidden: true, id: "connection-msg" });
  const details = section("Details", "connection-details");
  const channels = section("Channels", "connection-channels");
  const close = dangerButton("Close this connection", "connection-close", async () => {
    await api.del(cpath, { headers: { "X-Reason": "Closed via the Warren management UI" } });
    location.hash = route("connections");
    return "Closed " + name + ".";
  }, status);
  return mount(ctx, "Connection", name, status, [details.el, channels.el, close], async () => {
    const [c, chs] = await Promise.all([api.get(cpath), api.get(cpath + "/channels")]);
    const p = c.client_properties || {};
    details.set(h("table", { className: "props" }, h("tbody", {},
      prop("Virtual host", link(c.vhost, "vhost", c.vhost)), prop("User", link(c.user, "user", c.user)),
      prop("State", c.state), prop("Protocol", c.protocol + (c.ssl ? " (TLS)" : "")),
      prop("Client", [p.product, p.version, p.platform].filter((x) => typeof x === "string").join(" ")),
      prop("Client name", p.connection_name || ""), prop("Connected", time(c.connected_at)),
      prop("Peer", (c.peer_host || "") + ":" + (c.peer_port || "")), prop("Heartbeat", num(c.timeout) + " s"),
      prop("Frame max", num(c.frame_max)), prop("Channels", h("span", { id: "connection-channel-count" }, num(c.channels))),
      prop("Channel max", num(c.channel_max)), prop("Publish", statRate(c.message_stats, "publish")),
      prop("Client properties", json(p)))));
    channels.set(table("connection-channels-table", ["Channel", "Mode", "Prefetch", "Unacked", "Consumers"],
      chs.map((ch) => [link(ch.name, "channel", ch.name), [ch.confirm ? "Confirm" : "", ch.transactional ? "Tx" : ""].filter(Boolean).join(" "),
        num(ch.prefetch_count), num(ch.messages_unacknowledged), num(ch.consumer_count)]), "No channels."));
  });
}

export async function user(ctx) {
  const [name] = ctx.params;
  const status = h("div", { hidden: true, id: "user-msg" });
  const details = section("Details", "user-details");
  const perms = section("Permissions", "user-permissions");
  const topics = section("Topic permissions", "user-topic-permissions");
  return mount(ctx, "User", name, status, [details.el, perms.el, topics.el], async () => {
    const [u, ps, tps, limits] = await Promise.all([api.get(api.path("users", name)),
      api.get(api.path("users", name, "permissions")), api.get(api.path("users", name, "topic-permissions")),
      api.get(api.path("user-limits", name)).catch(() => [])]);
    const l = (limits[0] || {}).value || {};
    details.set(h("table", { className: "props" }, h("tbody", {},
      prop("Tags", h("span", { id: "user-tags" }, (u.tags || []).join(", ") || "none")),
      prop("Password", u.password_hash ? "set (" + (u.hashing_algorithm || "") + ")" : "none: cannot log in with a password"),
      prop("Max connections", l["max-connections"] ?? "no limit"), prop("Max channels", l["max-channels"] ?? "no limit"))));
    perms.set(table("user-permissions-table", ["Virtual host", "Configure", "Write", "Read"],
      ps.map((p) => [link(p.vhost, "vhost", p.vhost), p.configure, p.write, p.read]), "No permissions."));
    topics.set(table("user-topic-permissions-table", ["Virtual host", "Exchange", "Write", "Read"],
      tps.map((p) => [link(p.vhost, "vhost", p.vhost), p.exchange, p.write, p.read]), "No topic permissions."));
  });
}

export async function vhost(ctx) {
  const [name] = ctx.params;
  const status = h("div", { hidden: true, id: "vhost-msg" });
  const details = section("Details", "vhost-details");
  const perms = section("Permissions", "vhost-permissions");
  return mount(ctx, "Virtual host", name, status, [details.el, perms.el], async () => {
    const [v, ps, limits] = await Promise.all([api.get(api.path("vhosts", name)),
      api.get(api.path("vhosts", name, "permissions")).catch(() => []),
      api.get(api.path("vhost-limits", name)).catch(() => [])]);
    const l = (limits[0] || {}).value || {};
    details.set(h("table", { className: "props" }, h("tbody", {},
      prop("Description", v.description || ""), prop("Tags", (v.tags || []).join(", ")),
      prop("Ready", num(v.messages_ready)), prop("Unacked", num(v.messages_unacknowledged)),
      prop("Total", h("span", { id: "vhost-messages" }, num(v.messages))),
      prop("Max connections", l["max-connections"] ?? "no limit"), prop("Max queues", l["max-queues"] ?? "no limit"),
      prop("Queues", link("List its queues", "queues")))));
    perms.set(table("vhost-permissions-table", ["User", "Configure", "Write", "Read"],
      ps.map((p) => [link(p.user, "user", p.user), p.configure, p.write, p.read]), "No permissions."));
  });
}

// used shows a figure against its limit: "12 of 1,024 (1.2%)".
function used(n, limit, fmt = num) {
  if (!limit) return fmt(n);
  return `${fmt(n)} of ${fmt(limit)} (${(100 * n / limit).toFixed(1)}%)`;
}

export async function node(ctx) {
  const [name] = ctx.params;
  const npath = api.path("nodes", name);
  const status = h("div", { hidden: true, id: "node-msg" });
  const details = section("Details", "node-details");
  const memory = section("Memory", "node-memory");
  const store = section("Store", "node-store");
  return mount(ctx, "Node", name, status, [details.el, memory.el, store.el], async () => {
    const [n, m, cl] = await Promise.all([api.get(npath), api.get(npath + "/memory"),
      api.get("/api/warren/cluster").catch(() => null)]);
    details.set(h("table", { className: "props" }, h("tbody", {},
      prop("Uptime", num(Math.floor((n.uptime || 0) / 1000)) + " s"), prop("Process", n.os_pid || ""),
      prop("Processors", num(n.processors)),
      prop("Memory", h("span", { id: "node-mem" }, used(n.mem_used, n.mem_limit, bytes) + (n.mem_alarm ? " — alarm raised" : ""))),
      prop("Free disk", h("span", { id: "node-disk" }, bytes(n.disk_free) + " (limit " + bytes(n.disk_free_limit) + ")" +
        (n.disk_free_alarm ? " — alarm raised" : ""))),
      prop("File descriptors", h("span", { id: "node-fds" }, used(n.fd_used, n.fd_total))),
      prop("Sockets", h("span", { id: "node-sockets" }, used(n.sockets_used, n.sockets_total))),
      prop("Goroutines", num(n.proc_used)), prop("Go", n.go_version || ""),
      prop("Plugins", (n.enabled_plugins || []).join(", ") || "none"))));
    const mem = m.memory;
    if (typeof mem !== "object" || mem === null) {
      memory.set(h("p", { className: "muted", id: "node-memory-table" }, "The node did not report its memory."));
    } else {
      const total = (mem.total || {}).rss || 0;
      const cats = Object.entries(mem).filter(([, v]) => typeof v === "number").sort((a, b) => b[1] - a[1]);
      memory.set(table("node-memory-table", ["Category", "Bytes", "Share of resident memory"],
        cats.map(([k, v]) => [k, bytes(v), total ? (100 * v / total).toFixed(1) + "%" : ""]), "Nothing reported."));
    }
    const st = n.store || {};
    const raft = cl && cl.node === name && cl.clustered
      ? [prop("Raft role", cl.raft_role), prop("Raft term", num(cl.raft_term)), prop("Raft commit index", num(cl.raft_commit_index)),
        prop("Raft log", num(cl.raft_log_entries) + " entries, " + bytes(cl.raft_log_bytes))]
      : [];
    store.set(n.store === undefined && raft.length === 0
      ? h("p", { className: "muted", id: "node-store-table" }, "Only the node itself reports its store.")
      : h("table", { className: "props", id: "node-store-table" }, h("tbody", {},
        prop("On disk", bytes(st.disk_bytes)), prop("Commits", num(st.commits) + " (" + num(st.syncs) + " syncs)"),
        prop("Written to the log", bytes(st.wal_bytes_written)), prop("Compaction debt", bytes(st.compaction_debt_bytes)),
        prop("Read amplification", num(st.read_amplification)),
        prop("Block cache", bytes(st.cache_bytes) + " (" + num(st.cache_hits) + " hits, " + num(st.cache_misses) + " misses)"),
        prop("Commit errors", num(st.commit_errors)), ...raft)));
  });
}

export async function channel(ctx) {
  const [name] = ctx.params;
  const status = h("div", { hidden: true, id: "channel-msg" });
  const details = section("Details", "channel-details");
  const consumers = section("Consumers", "channel-consumers");
  return mount(ctx, "Channel", name, status, [details.el, consumers.el], async () => {
    const c = await api.get(api.path("channels", name));
    const conn = (c.connection_details || {}).name || "";
    details.set(h("table", { className: "props" }, h("tbody", {},
      prop("Connection", link(conn, "connection", conn)), prop("Virtual host", link(c.vhost, "vhost", c.vhost)),
      prop("User", link(c.user, "user", c.user)), prop("Node", link(c.node, "node", c.node)), prop("State", c.state),
      prop("Mode", [c.confirm ? "Confirm" : "", c.transactional ? "Transactional" : ""].filter(Boolean).join(", ") || "none"),
      prop("Prefetch", num(c.prefetch_count) + (c.global_prefetch_count ? ` (global ${num(c.global_prefetch_count)})` : "")),
      prop("Unacked", h("span", { id: "channel-unacked" }, num(c.messages_unacknowledged))),
      prop("Publish", statRate(c.message_stats, "publish")), prop("Deliver / get", statRate(c.message_stats, "deliver_get")),
      prop("Ack", statRate(c.message_stats, "ack")))));
    consumers.set(table("channel-consumers-table", ["Queue", "Tag", "Ack", "Prefetch", "Exclusive", "Active"],
      (c.consumer_details || []).map((k) => [link(k.queue.name, "queue", k.queue.vhost, k.queue.name), k.consumer_tag,
        k.ack_required ? "manual" : "auto", num(k.prefetch_count), k.exclusive ? "yes" : "", k.active ? "yes" : "waiting"]),
      "No consumers."));
  });
}
