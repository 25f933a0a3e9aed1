// Warren's WebAssembly plugins: each one's state and what the module says
// of itself (ABI, features, settings, size, live instances), with enable
// and disable. Disabling a plugin whose types still have exchanges is
// refused by the API unless forced; the error says so.

import * as api from "./api.js";
import { h, append, replace, message } from "./dom.js";
import { num, bytes, time } from "./format.js";

export async function render(ctx) {
  const status = h("div", { hidden: true, id: "plugins-msg" });
  const list = h("div", { id: "plugins" });
  const force = h("input", { type: "checkbox", id: "plugins-force" });
  append(ctx.main, [h("h2", {}, "Plugins"), h("p", { className: "muted" },
    "Exchange types beyond the built-in four come from WebAssembly plugins, enabled here in the running broker."),
  api.can().admin ? h("label", { className: "check" }, force, " Force disable (even when exchanges of its types exist)") : null, status, list]);

  const act = async (p, verb) => {
    try {
      await api.post(api.query(api.path("plugins", p.name, verb), { force: verb === "disable" && force.checked ? "true" : "" }));
      message(status, "ok", `Plugin ${p.name} ${verb}d.`);
    } catch (e) {
      message(status, "error", e.message);
    }
    await refresh();
  };

  const refresh = async () => {
    const ps = await api.get("/api/plugins");
    replace(list, ps.length ? ps.map((p) => card(p, act)) : h("p", {}, "No plugins are available."));
    list.dataset.state = "loaded";
  };
  await refresh();
}

function card(p, act) {
  const info = p.info || {};
  const rows = [
    ["State", p.state || (p.enabled ? "enabled" : "disabled")],
    ["Version", p.version || info.version],
    ["Exchange types", (p.types || info.types || []).join(", ")],
    ["Exchanges of its types", num(p.exchanges ?? info.exchanges)],
    ["Source", p.source],
    ["ABI", info.abi],
    ["Features", (info.features || []).join(", ")],
    ["Module size", info.size ? bytes(info.size) : ""],
    ["Instances", info.instances !== undefined ? num(info.instances) : ""],
    ["Loaded", info.loaded && !info.loaded.startsWith("0001") ? time(Date.parse(info.loaded)) : ""],
    ["Disabled because", info.disabled],
  ].filter(([, v]) => v !== undefined && v !== "");
  const settings = info.settings && info.settings.length
    ? h("table", { className: "list" }, h("thead", {}, h("tr", {}, h("th", {}, "Setting"), h("th", {}, "Kind"), h("th", {}, "Description"))),
      h("tbody", {}, info.settings.map((s) => h("tr", {}, h("td", {}, s.name), h("td", {}, s.kind), h("td", {}, s.doc || "")))))
    : null;
  const button = !api.can().admin ? null : p.enabled
    ? h("button", { type: "button", className: "danger", id: "plugin-disable-" + p.name, on: { click: () => act(p, "disable") } }, "Disable")
    : h("button", { type: "button", id: "plugin-enable-" + p.name, on: { click: () => act(p, "enable") } }, "Enable");
  return h("section", { className: "plugin " + (p.enabled ? "on" : "off"), id: "plugin-" + p.name, dataset: { enabled: String(!!p.enabled) } },
    h("h3", {}, p.name, " ", h("span", { className: "badge" }, p.enabled ? "enabled" : "disabled")),
    h("table", { className: "props" }, h("tbody", {}, rows.map(([k, v]) => h("tr", {}, h("th", {}, k), h("td", {}, String(v)))))),
    settings, button);
}
