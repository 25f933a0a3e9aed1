// Detail pages: one connection (its figures, client, channels; close it),
// one user (tags, permissions, topic permissions, limits) and one virtual
// host (its figures, description, limits, who may use it). The lists link
// to them; each refreshes while it is open.

import * as api from "./api.js";
import { h, link, message, route } from "./dom.js";
import { num, json, time, statRate } from "./format.js";
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
      chs.map((ch) => [ch.name, [ch.confirm ? "Confirm" : "", ch.transactional ? "Tx" : ""].filter(Boolean).join(" "),
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
