// Forms for the pages' actions: labelled fields, a submit button and a
// status line that shows the API's answer or its error.

import { h, message } from "./dom.js";

// field kinds: text (default), password, number, textarea, checkbox,
// select (options: [value] or [[value, label]]).
function input(id, f) {
  const attrs = { id: id + "-" + f.name, name: f.name, placeholder: f.placeholder, required: f.required };
  if (f.type === "textarea") return h("textarea", { ...attrs, rows: f.rows || 3, value: f.value || "" });
  if (f.type === "select") {
    const sel = h("select", attrs, (f.options || []).map((o) => {
      const [value, label] = Array.isArray(o) ? o : [o, o];
      return h("option", { value }, label);
    }));
    if (f.value !== undefined) sel.value = f.value;
    return sel;
  }
  if (f.type === "checkbox") return h("input", { ...attrs, type: "checkbox", checked: !!f.value });
  return h("input", { ...attrs, type: f.type || "text", value: f.value ?? "", min: f.min });
}

// actionForm builds a form; onSubmit(values) returns a promise of a
// success text (or nothing), and a thrown error is shown as the error.
// The status line's id is `${id}-msg`.
export function actionForm({ id, title, fields, submit, onSubmit, className }) {
  const inputs = {};
  const rows = fields.map((f) => {
    const el = input(id, f);
    inputs[f.name] = el;
    if (f.type === "checkbox") return h("label", { className: "field check" }, el, " " + f.label);
    return h("label", { className: "field" }, h("span", {}, f.label), el, f.help ? h("small", {}, f.help) : null);
  });
  const status = h("div", { id: id + "-msg", hidden: true });
  const button = h("button", { type: "submit", id: id + "-submit" }, submit);
  const form = h("form", { id, className: "action " + (className || ""), noValidate: true },
    title ? h("h3", {}, title) : null, h("div", { className: "fields" }, rows), h("div", { className: "buttons" }, button), status);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const values = {};
    for (const [k, el] of Object.entries(inputs)) values[k] = el.type === "checkbox" ? el.checked : el.value;
    button.disabled = true;
    message(status, "info", "Working…");
    try {
      const text = await onSubmit(values, inputs);
      message(status, "ok", text || "Done.");
    } catch (e) {
      message(status, "error", e.message);
    } finally {
      button.disabled = false;
    }
  });
  form.inputs = inputs;
  return form;
}

// dangerButton acts on the second click within five seconds, so a stray
// click deletes nothing; it needs no confirm() dialog.
export function dangerButton(label, id, onConfirm, status) {
  let armed = 0;
  const b = h("button", { type: "button", className: "danger", id });
  b.textContent = label;
  b.addEventListener("click", async () => {
    if (Date.now() - armed > 5000) {
      armed = Date.now();
      b.textContent = "Click again to " + label.toLowerCase();
      b.classList.add("armed");
      return;
    }
    armed = 0;
    b.textContent = label;
    b.classList.remove("armed");
    b.disabled = true;
    try {
      const text = await onConfirm();
      if (status) message(status, "ok", text || "Done.");
    } catch (e) {
      if (status) message(status, "error", e.message);
    } finally {
      b.disabled = false;
    }
  });
  return b;
}

// parseJSONField reads an optional JSON object from a form field, naming
// the field when it is not one.
export function parseJSONField(label, text) {
  const t = (text || "").trim();
  if (!t) return {};
  let v;
  try {
    v = JSON.parse(t);
  } catch (e) {
    throw new Error(`${label}: not valid JSON (${e.message})`);
  }
  if (v === null || typeof v !== "object" || Array.isArray(v)) throw new Error(`${label}: must be a JSON object`);
  return v;
}
