// Users, virtual hosts, permissions, limits, policies and operator
// policies, and the cluster (its name, global parameters, feature flags):
// list, create, delete.
// These lists are small and the API answers them whole, so they are
// filtered and paged in the tab and refreshed after each change rather
// than on a timer (a timer would disarm a half-clicked Delete).

import * as api from "./api.js";
import { h, link, message } from "./dom.js";
import { num, json } from "./format.js";
import { Table } from "./table.js";
import { actionForm, dangerButton, parseJSONField } from "./forms.js";

function page(ctx, title, table, form, status) {
  ctx.main.append(h("h2", {}, title), status, table.el, form);
  return table.reload();
}

function deleteButton(id, status, fn, table) {
  return dangerButton("Delete", id, async () => {
    await fn();
    table.reload();
    return "Deleted.";
  }, status);
}

export function users(ctx) {
  const status = h("div", { hidden: true, id: "users-msg" });
  const t = new Table({
    id: "users", sort: "name", fetchAll: () => api.get("/api/users"),
    columns: [
      { label: "Name", key: "name", render: (u) => link(u.name, "user", u.name) },
      { label: "Tags", key: "tags", render: (u) => (Array.isArray(u.tags) ? u.tags.join(", ") : u.tags || "") },
      { label: "Password", render: (u) => (u.password_hash ? "set" : "none") },
      { label: "", render: (u) => deleteButton("delete-user-" + u.name, status, () => api.del(api.path("users", u.name)), t) },
    ],
  });
  const form = actionForm({
    id: "add-user", title: "Add or update a user", submit: "Save user",
    fields: [
      { name: "name", label: "Username", required: true },
      { name: "password", label: "Password", type: "password" },
      { name: "tags", label: "Tags", placeholder: "administrator, monitoring, policymaker, management",
        help: "Comma-separated; administrator can do everything." },
    ],
    onSubmit: async (v) => {
      const body = { tags: v.tags.split(",").map((s) => s.trim()).filter(Boolean).join(",") };
      if (v.password) body.password = v.password;
      else body.password_hash = "";
      await api.put(api.path("users", v.name), body);
      t.reload();
      return `User ${v.name} saved.`;
    },
  });
  return page(ctx, "Users", t, form, status);
}

export function vhosts(ctx) {
  const status = h("div", { hidden: true, id: "vhosts-msg" });
  const t = new Table({
    id: "vhosts", sort: "name", fetchAll: () => api.get("/api/vhosts"),
    columns: [
      { label: "Name", key: "name", render: (v) => link(v.name, "vhost", v.name) },
      { label: "Description", key: "description", render: (v) => v.description || "" },
      { label: "Messages", key: "messages", className: "num", render: (v) => num(v.messages) },
      { label: "Ready", key: "messages_ready", className: "num", render: (v) => num(v.messages_ready) },
      { label: "Unacked", key: "messages_unacknowledged", className: "num", render: (v) => num(v.messages_unacknowledged) },
      { label: "", render: (v) => deleteButton("delete-vhost-" + v.name, status, () => api.del(api.path("vhosts", v.name)), t) },
    ],
  });
  const form = actionForm({
    id: "add-vhost", title: "Add a virtual host", submit: "Add virtual host",
    fields: [{ name: "name", label: "Name", required: true }, { name: "description", label: "Description" }],
    onSubmit: async (v) => {
      const body = v.description ? { description: v.description } : {};
      await api.put(api.path("vhosts", v.name), body);
      t.reload();
      return `Virtual host ${v.name} added.`;
    },
  });
  return page(ctx, "Virtual hosts", t, form, status);
}

export async function permissions(ctx) {
  const status = h("div", { hidden: true, id: "permissions-msg" });
  const t = new Table({
    id: "permissions", sort: "user", nameOf: (p) => p.user + " " + p.vhost,
    fetchAll: () => api.get("/api/permissions"),
    columns: [
      { label: "User", key: "user", render: (p) => p.user },
      { label: "Virtual host", key: "vhost", render: (p) => p.vhost },
      { label: "Configure", render: (p) => p.configure },
      { label: "Write", render: (p) => p.write },
      { label: "Read", render: (p) => p.read },
      { label: "", render: (p) => deleteButton("delete-permission-" + p.user + "-" + p.vhost, status,
        () => api.del(api.path("permissions", p.vhost, p.user)), t) },
    ],
  });
  const [users, vhosts] = await Promise.all([api.get("/api/users").catch(() => []), api.get("/api/vhosts").catch(() => [])]);
  const form = actionForm({
    id: "set-permission", title: "Set permissions", submit: "Set permissions",
    fields: [
      { name: "user", label: "User", type: "select", options: users.map((u) => u.name) },
      { name: "vhost", label: "Virtual host", type: "select", options: vhosts.map((v) => v.name) },
      { name: "configure", label: "Configure regexp", value: ".*" },
      { name: "write", label: "Write regexp", value: ".*" },
      { name: "read", label: "Read regexp", value: ".*" },
    ],
    onSubmit: async (v) => {
      await api.put(api.path("permissions", v.vhost, v.user), { configure: v.configure, write: v.write, read: v.read });
      t.reload();
      return `Permissions of ${v.user} in ${v.vhost} set.`;
    },
  });
  await page(ctx, "Permissions", t, form, status);
  return topicPermissions(ctx, users, vhosts);
}

// topicPermissions narrow the routing keys a user may publish with
// (write) and bind with (read) on one topic exchange.
function topicPermissions(ctx, users, vhosts) {
  const status = h("div", { hidden: true, id: "topic-permissions-msg" });
  const t = new Table({
    id: "topic-permissions", sort: "user", nameOf: (p) => p.user + " " + p.vhost + " " + p.exchange,
    fetchAll: () => api.get("/api/topic-permissions"),
    columns: [
      { label: "User", key: "user", render: (p) => p.user },
      { label: "Virtual host", key: "vhost", render: (p) => p.vhost },
      { label: "Exchange", key: "exchange", render: (p) => p.exchange },
      { label: "Write", render: (p) => p.write },
      { label: "Read", render: (p) => p.read },
      { label: "", render: (p) => deleteButton("delete-topic-permission-" + p.user + "-" + p.vhost + "-" + p.exchange, status,
        () => api.del(api.path("topic-permissions", p.vhost, p.user, p.exchange)), t) },
    ],
  });
  const form = actionForm({
    id: "set-topic-permission", title: "Set a topic permission", submit: "Set topic permission",
    fields: [
      { name: "user", label: "User", type: "select", options: users.map((u) => u.name) },
      { name: "vhost", label: "Virtual host", type: "select", options: vhosts.map((v) => v.name) },
      { name: "exchange", label: "Exchange", value: "amq.topic", required: true },
      { name: "write", label: "Write regexp", value: ".*" },
      { name: "read", label: "Read regexp", value: ".*" },
    ],
    onSubmit: async (v) => {
      await api.put(api.path("topic-permissions", v.vhost, v.user), { exchange: v.exchange, write: v.write, read: v.read });
      t.reload();
      return `Topic permission of ${v.user} in ${v.vhost} on ${v.exchange} set.`;
    },
  });
  ctx.main.append(h("h2", {}, "Topic permissions"), status, t.el, form);
  return t.reload();
}

// policies: the users' policies, and for an administrator the operator
// policies that cap them (limits only; of a number both set, the lower
// is in force).
export async function policies(ctx) {
  const vhosts = await api.get("/api/vhosts").catch(() => []);
  const section = (kind, title, noun, placeholder) => {
    const status = h("div", { hidden: true, id: kind + "-msg" });
    const t = new Table({
      id: kind, sort: "name",
      fetchAll: () => api.get(ctx.vhost() ? api.path(kind, ctx.vhost()) : "/api/" + kind),
      columns: [
        { label: "Virtual host", key: "vhost", render: (p) => p.vhost },
        { label: "Name", key: "name", render: (p) => p.name },
        { label: "Pattern", key: "pattern", render: (p) => p.pattern },
        { label: "Apply to", key: "apply-to", render: (p) => p["apply-to"] },
        { label: "Priority", key: "priority", className: "num", render: (p) => num(p.priority) },
        { label: "Definition", render: (p) => json(p.definition) },
        { label: "", render: (p) => deleteButton("delete-" + noun + "-" + p.name, status, () => api.del(api.path(kind, p.vhost, p.name)), t) },
      ],
    });
    const form = actionForm({
      id: "add-" + noun, title: "Add or update " + (kind === "policies" ? "a policy" : "an operator policy"), submit: "Save " + noun.replace("-", " "),
      fields: [
        { name: "vhost", label: "Virtual host", type: "select", options: vhosts.map((v) => v.name), value: ctx.vhost() || "/" },
        { name: "name", label: "Name", required: true },
        { name: "pattern", label: "Pattern (regexp)", required: true, placeholder: "^amq\\." },
        { name: "apply_to", label: "Apply to", type: "select", options: [["all", "Exchanges and queues"], ["queues", "Queues"], ["exchanges", "Exchanges"]] },
        { name: "priority", label: "Priority", type: "number", value: "0" },
        { name: "definition", label: "Definition (JSON)", type: "textarea", required: true, placeholder },
      ],
      onSubmit: async (v) => {
        const definition = parseJSONField("Definition", v.definition);
        await api.put(api.path(kind, v.vhost, v.name),
          { pattern: v.pattern, definition, priority: Number(v.priority) || 0, "apply-to": v.apply_to });
        t.reload();
        return `${title.replace(/ies$/, "y")} ${v.name} saved.`;
      },
    });
    return page(ctx, title, t, form, status);
  };
  await section("policies", "Policies", "policy", '{"max-length": 1000, "overflow": "reject-publish"}');
  if (!api.can().admin) return;
  return section("operator-policies", "Operator policies", "operator-policy", '{"max-length": 100000, "message-ttl": 86400000}');
}

// limits: vhosts' (max-connections, max-queues) and users'
// (max-connections, max-channels); each row one limit, deleted alone.
export async function limits(ctx) {
  const [users, vhosts] = await Promise.all([api.get("/api/users").catch(() => []), api.get("/api/vhosts").catch(() => [])]);
  const section = (kind, title, path, ownerKey, names, owners) => {
    const status = h("div", { hidden: true, id: kind + "-limits-msg" });
    const t = new Table({
      id: kind + "-limits", sort: ownerKey, nameOf: (l) => l[ownerKey] + " " + l.name,
      fetchAll: async () => (await api.get(path)).flatMap((e) =>
        Object.entries(e.value || {}).map(([name, value]) => ({ [ownerKey]: e[ownerKey], name, value }))),
      columns: [
        { label: kind === "vhost" ? "Virtual host" : "User", key: ownerKey, render: (l) => l[ownerKey] },
        { label: "Limit", key: "name", render: (l) => l.name },
        { label: "Value", key: "value", className: "num", render: (l) => num(l.value) },
        { label: "", render: (l) => deleteButton("delete-" + kind + "-limit-" + l[ownerKey] + "-" + l.name, status,
          () => api.del(api.path(kind + "-limits", l[ownerKey], l.name)), t) },
      ],
    });
    const form = actionForm({
      id: "set-" + kind + "-limit", title: "Set a " + (kind === "vhost" ? "virtual host" : "user") + " limit", submit: "Set limit",
      fields: [
        { name: "owner", label: kind === "vhost" ? "Virtual host" : "User", type: "select", options: owners },
        { name: "name", label: "Limit", type: "select", options: names },
        { name: "value", label: "Value", type: "number", value: "100", help: "A negative value is no limit; 0 allows none." },
      ],
      onSubmit: async (v) => {
        await api.put(api.path(kind + "-limits", v.owner, v.name), { value: Number(v.value) });
        t.reload();
        return `Limit ${v.name} of ${v.owner} set.`;
      },
    });
    ctx.main.append(h("h2", {}, title), status, t.el, form);
    return t.reload();
  };
  await section("vhost", "Virtual host limits", "/api/vhost-limits", "vhost", ["max-connections", "max-queues"], vhosts.map((v) => v.name));
  return section("user", "User limits", "/api/user-limits", "user", ["max-connections", "max-channels"], users.map((u) => u.name));
}

// cluster: the cluster's name, its global parameters (any JSON value) and
// the feature flags the broker reports, as RabbitMQ's Admin pages show
// them.
export async function cluster(ctx) {
  const nameStatus = h("div", { hidden: true, id: "cluster-name-msg" });
  const current = h("span", { className: "name", id: "cluster-name" });
  const showName = async () => { current.textContent = (await api.get("/api/cluster-name")).name; };
  const nameForm = actionForm({
    id: "set-cluster-name", title: "Rename the cluster", submit: "Rename",
    fields: [{ name: "name", label: "Name", required: true }],
    onSubmit: async (v) => {
      await api.put("/api/cluster-name", { name: v.name });
      await showName();
      return "The cluster is " + v.name + " now.";
    },
  });
  ctx.main.append(h("h2", {}, "Cluster ", current), nameStatus, nameForm);
  await showName();

  const status = h("div", { hidden: true, id: "global-parameters-msg" });
  const t = new Table({
    id: "global-parameters", sort: "name", fetchAll: () => api.get("/api/global-parameters"),
    columns: [
      { label: "Name", key: "name", render: (p) => p.name },
      { label: "Value", render: (p) => json(p.value) },
      { label: "", render: (p) => p.name === "cluster_name" ? "" : deleteButton("delete-global-parameter-" + p.name, status,
        () => api.del(api.path("global-parameters", p.name)), t) },
    ],
  });
  const form = actionForm({
    id: "set-global-parameter", title: "Set a global parameter", submit: "Set parameter",
    fields: [
      { name: "name", label: "Name", required: true },
      { name: "value", label: "Value", type: "textarea", value: '{"owner": "team-a"}', help: "Any JSON value." },
    ],
    onSubmit: async (v) => {
      let value;
      try {
        value = JSON.parse(v.value);
      } catch (e) {
        throw new Error(`Value: not valid JSON (${e.message})`);
      }
      await api.put(api.path("global-parameters", v.name), { value });
      t.reload();
      return `Global parameter ${v.name} set.`;
    },
  });
  ctx.main.append(h("h2", {}, "Global parameters"), status, t.el, form);
  await t.reload();

  const flags = new Table({
    id: "feature-flags", sort: "name", fetchAll: () => api.get("/api/feature-flags"),
    columns: [
      { label: "Name", key: "name", render: (f) => f.name },
      { label: "State", key: "state", render: (f) => f.state },
      { label: "Description", key: "desc", render: (f) => f.desc || "" },
    ],
  });
  ctx.main.append(h("h2", {}, "Feature flags"), flags.el);
  return flags.reload();
}
