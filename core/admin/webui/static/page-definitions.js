// Definitions: download the broker's (or one vhost's) definitions as
// RabbitMQ's JSON, and upload such a file. The file is read in the tab and
// posted as application/json; nothing is sent until it parses.

import * as api from "./api.js";
import { h, message } from "./dom.js";

export function render(ctx) {
  const dstatus = h("div", { hidden: true, id: "definitions-download-msg" });
  const ustatus = h("div", { hidden: true, id: "definitions-upload-msg" });
  const scope = () => (ctx.vhost() ? api.path("definitions", ctx.vhost()) : "/api/definitions");
  const where = ctx.vhost() ? `virtual host ${ctx.vhost()}` : "the whole broker";

  const download = h("button", { type: "button", id: "definitions-download" }, "Download definitions");
  download.addEventListener("click", async () => {
    try {
      const text = await api.get(scope(), { raw: true });
      JSON.parse(text); // refuse to save something that is not definitions
      const url = URL.createObjectURL(new Blob([text], { type: "application/json" }));
      const stamp = new Date().toISOString().slice(0, 10);
      const a = h("a", { href: url, download: `warren-definitions-${stamp}.json`, hidden: true });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
      message(dstatus, "ok", `Definitions of ${where} downloaded (${text.length} bytes). The file holds password hashes: keep it private.`);
    } catch (e) {
      message(dstatus, "error", e.message);
    }
  });

  const file = h("input", { type: "file", id: "definitions-file", accept: "application/json,.json" });
  const upload = h("button", { type: "button", id: "definitions-upload" }, "Upload definitions");
  upload.addEventListener("click", async () => {
    const f = file.files && file.files[0];
    if (!f) return message(ustatus, "error", "Choose a definitions file first.");
    try {
      const text = await f.text();
      try {
        JSON.parse(text);
      } catch (e) {
        throw new Error(`${f.name} is not JSON: ${e.message}`);
      }
      await api.post(scope(), text);
      message(ustatus, "ok", `Definitions from ${f.name} imported into ${where}.`);
    } catch (e) {
      message(ustatus, "error", e.message);
    }
  });

  ctx.main.append(h("h2", {}, "Definitions"),
    h("p", {}, "Users, virtual hosts, permissions, policies, exchanges, queues and bindings, in RabbitMQ's definitions format. " +
      "The virtual host chosen at the top limits both actions; \"All vhosts\" means the whole broker."),
    h("section", { className: "action" }, h("h3", {}, "Export"), download, dstatus),
    h("section", { className: "action" }, h("h3", {}, "Import"), file, upload, ustatus));
  ctx.main.dataset.loaded = "true";
}
