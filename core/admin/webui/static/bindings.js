// The bindings table and the add-binding form, shared by the queue page
// and the exchange page.

import * as api from "./api.js";
import { h, link, replace, message } from "./dom.js";
import { json } from "./format.js";
import { actionForm, parseJSONField } from "./forms.js";
import { exchangeName } from "./page-lists.js";

// apiExchange is the name the API's paths use: the default exchange "" is
// written amq.default there.
export const apiExchange = (name) => (name === "" ? "amq.default" : name);

// bindingsTable renders bindings with an Unbind button each (none for the
// default exchange's implicit bindings, which cannot be removed).
export function bindingsTable(id, bindings, onChange) {
  const status = h("div", { hidden: true, id: id + "-msg" });
  const rows = bindings.map((b) => {
    const kind = b.destination_type === "exchange" ? "e" : "q";
    const dest = b.destination_type === "exchange"
      ? link(b.destination, "exchange", b.vhost, b.destination)
      : link(b.destination, "queue", b.vhost, b.destination);
    const unbind = b.source === ""
      ? h("span", { className: "muted" }, "implicit")
      : h("button", { type: "button", className: "small danger", on: { click: async () => {
        try {
          await api.del(api.path("bindings", b.vhost, "e", b.source, kind, b.destination, b.properties_key));
          onChange();
        } catch (e) {
          message(status, "error", e.message);
        }
      } } }, "Unbind");
    return h("tr", {},
      h("td", {}, link(exchangeName(b.source), "exchange", b.vhost, b.source)),
      h("td", {}, dest), h("td", {}, b.destination_type),
      h("td", {}, b.routing_key), h("td", {}, json(b.arguments)), h("td", {}, unbind));
  });
  if (!rows.length) rows.push(h("tr", {}, h("td", { colSpan: 6, className: "empty" }, "No bindings.")));
  return h("div", {},
    h("table", { className: "list", id, dataset: { state: "loaded" } },
      h("thead", {}, h("tr", {}, ["From", "To", "Kind", "Routing key", "Arguments", ""].map((x) => h("th", {}, x)))),
      h("tbody", {}, rows)),
    status);
}

// bindForm adds a binding; fixed says which end is this page's object:
// {source} on an exchange page, {queue} on a queue page.
export function bindForm(id, vhost, fixed, onChange) {
  const fields = fixed.queue !== undefined
    ? [{ name: "source", label: "From exchange", required: true }]
    : [{ name: "kind", label: "To", type: "select", options: [["q", "queue"], ["e", "exchange"]] },
      { name: "destination", label: "Destination name", required: true }];
  fields.push({ name: "routing_key", label: "Routing key" },
    { name: "arguments", label: "Arguments (JSON)", type: "textarea", rows: 2 });
  return actionForm({
    id, title: "Add a binding", submit: "Bind", fields,
    onSubmit: async (v) => {
      const source = fixed.queue !== undefined ? v.source : fixed.source;
      const kind = fixed.queue !== undefined ? "q" : v.kind;
      const dest = fixed.queue !== undefined ? fixed.queue : v.destination;
      await api.post(api.path("bindings", vhost, "e", source, kind, dest),
        { routing_key: v.routing_key, arguments: parseJSONField("Arguments", v.arguments) });
      onChange();
      return "Bound.";
    },
  });
}

// publishForm publishes through the API; routingKey pre-fills the key
// (the queue's name on a queue page, which publishes via the default
// exchange).
export function publishForm(id, vhost, exchange, routingKey, onDone) {
  return actionForm({
    id, title: "Publish a message", submit: "Publish",
    fields: [
      { name: "routing_key", label: "Routing key", value: routingKey || "" },
      { name: "delivery_mode", label: "Delivery mode", type: "select", options: [["1", "1 - non-persistent"], ["2", "2 - persistent"]] },
      { name: "headers", label: "Headers (JSON)", type: "textarea", rows: 2, placeholder: '{"x-match": "all"}' },
      { name: "properties", label: "Other properties (JSON)", type: "textarea", rows: 2, placeholder: '{"content_type": "text/plain", "priority": 5}' },
      { name: "payload", label: "Payload", type: "textarea", rows: 4 },
      { name: "encoding", label: "Payload encoding", type: "select", options: [["string", "string"], ["base64", "base64"]] },
    ],
    onSubmit: async (v) => {
      const properties = parseJSONField("Other properties", v.properties);
      properties.delivery_mode = Number(v.delivery_mode);
      const headers = parseJSONField("Headers", v.headers);
      if (Object.keys(headers).length) properties.headers = headers;
      const r = await api.post(api.path("exchanges", vhost, apiExchange(exchange), "publish"),
        { properties, routing_key: v.routing_key, payload: v.payload, payload_encoding: v.encoding });
      if (r && r.routed === false) throw new Error("Message published, but not routed to any queue.");
      if (onDone) onDone();
      return "Message published and routed.";
    },
  });
}

// section is a titled block whose body a refresh replaces.
export function section(title, id) {
  const body = h("div", { id });
  return { el: h("section", {}, h("h3", {}, title), body), set: (...c) => replace(body, ...c) };
}
