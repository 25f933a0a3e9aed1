// Building the page without HTML strings. Every piece of data reaches the
// DOM as a text node or an element property, so a name such as
// <img src=x onerror=alert(1)> stays text. innerHTML is never used.

// h makes an element: h("a", {href: "#/x", className: "link"}, "text", child).
// Attributes are set as properties where the element has one, otherwise with
// setAttribute; "on" attributes are refused (use the `on` key with
// functions), and "style" strings are not accepted either, so nothing here
// can turn data into script. Children may be strings, numbers, nodes,
// arrays of them, or null/undefined/false (skipped).
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "on") {
      for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
      continue;
    }
    if (k === "dataset") {
      Object.assign(el.dataset, v);
      continue;
    }
    if (/^on/i.test(k) || k === "innerHTML" || k === "outerHTML" || k === "style" || k === "srcdoc") {
      throw new Error("dom.h: refusing attribute " + k);
    }
    if (k === "href" && typeof v === "string" && !/^(#|\/|blob:)/.test(v)) {
      throw new Error("dom.h: only local links: " + v);
    }
    if (k in el && k !== "list" && k !== "form") el[k] = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

// append adds children (see h) to a node.
export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// clear removes every child of a node.
export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

// replace swaps a node's children for new ones.
export function replace(el, ...children) {
  return append(clear(el), children);
}

// link is an in-app link to a route built from path segments, each one
// percent-encoded so names with / # ? or spaces survive the trip.
export function link(text, ...segments) {
  return h("a", { href: route(...segments) }, text);
}

// route is the hash for a list of segments: route("queue", "/", "q") is
// "#/queue/%2F/q".
export function route(...segments) {
  return "#/" + segments.map(encodeURIComponent).join("/");
}

// message shows a status line: kind is "error", "ok" or "info".
export function message(el, kind, text) {
  el.className = "msg msg-" + kind;
  el.dataset.kind = kind;
  replace(el, text);
  el.hidden = !text;
}
