// One exchange: its settings, the bindings it is the source and the
// destination of, binding to it, publishing to it, deleting it.

import * as api from "./api.js";
import { h, message, route } from "./dom.js";
import { json, statRate, flags } from "./format.js";
import { dangerButton } from "./forms.js";
import { apiExchange, bindingsTable, bindForm, publishForm, section } from "./bindings.js";
import { exchangeName } from "./page-lists.js";
import { prop } from "./page-overview.js";

export async function render(ctx) {
  const vhost = ctx.params[0];
  const name = ctx.params[1] || "";
  const xpath = api.path("exchanges", vhost, apiExchange(name));
  const status = h("div", { hidden: true, id: "exchange-msg" });
  const details = section("Details", "exchange-details");
  const source = section("Bindings from this exchange", "exchange-source");
  const dest = section("Bindings to this exchange", "exchange-destination");
  const showError = (e) => message(status, "error", e.message);

  const refresh = async () => {
    const [x, from, to] = await Promise.all([api.get(xpath), api.get(xpath + "/bindings/source"), api.get(xpath + "/bindings/destination")]);
    const ms = x.message_stats || {};
    details.set(h("table", { className: "props" }, h("tbody", {},
      prop("Virtual host", x.vhost), prop("Type", x.type), prop("Features", flags(x)),
      prop("Policy", x.policy || ""), prop("Arguments", json(x.arguments)),
      prop("In", statRate(ms, "publish_in")), prop("Out", statRate(ms, "publish_out")))));
    source.set(bindingsTable("exchange-source-table", from, () => refresh().catch(showError)));
    dest.set(bindingsTable("exchange-destination-table", to, () => refresh().catch(showError)));
    ctx.main.dataset.loaded = "true";
  };

  const parts = [h("h2", {}, "Exchange ", h("span", { className: "name", id: "exchange-name" }, exchangeName(name))), status,
    details.el, source.el, dest.el];
  if (name !== "") parts.push(bindForm("exchange-bind", vhost, { source: name }, () => refresh().catch(showError)));
  parts.push(publishForm("exchange-publish", vhost, name, ""));
  if (name !== "" && !name.startsWith("amq.")) {
    const dstatus = h("div", { hidden: true, id: "exchange-delete-msg" });
    parts.push(h("section", { className: "action" }, h("h3", {}, "Delete"),
      dangerButton("Delete exchange", "exchange-delete", async () => {
        await api.del(xpath);
        location.hash = route("exchanges");
      }, dstatus), dstatus));
  }
  ctx.main.append(...parts);
  await refresh();
  ctx.every(() => refresh().catch(showError));
}
