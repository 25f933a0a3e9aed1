// The management API client. Credentials live in sessionStorage (this tab
// only, gone when it closes) and go out as an Authorization header on each
// fetch; credentials: "omit" keeps cookies and the browser's own basic-auth
// cache and prompt out of it. Bodies are JSON with Content-Type
// application/json, which the API requires of every state change.

const KEY = "warren.credentials";

// ApiError carries the API's {"error","reason"} and the HTTP status.
export class ApiError extends Error {
  constructor(status, error, reason) {
    super(describe(status, error, reason));
    this.status = status;
    this.error = error;
    this.reason = reason;
  }
}

function describe(status, error, reason) {
  const what = [error, reason].filter(Boolean).join(": ");
  return `${status} ${what || statusText(status)}`;
}

function statusText(status) {
  return {
    400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
    405: "Method Not Allowed", 415: "Unsupported Media Type", 500: "Internal Server Error",
    503: "Service Unavailable",
  }[status] || "HTTP error";
}

// basic encodes user:password as UTF-8 then base64, as RFC 7617 allows;
// btoa alone fails on characters beyond Latin-1.
function basic(user, password) {
  const bytes = new TextEncoder().encode(user + ":" + password);
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return "Basic " + btoa(bin);
}

export function savedUser() {
  try {
    const c = JSON.parse(sessionStorage.getItem(KEY) || "null");
    return c && c.user;
  } catch {
    return null;
  }
}

// can says what the logged-in user's tags let it do, as the API decides
// it (core/admin/access.go): the UI only hides what would be refused.
export function can() {
  let tags = [];
  try {
    tags = (JSON.parse(sessionStorage.getItem(KEY) || "null") || {}).tags || [];
  } catch { /* no login */ }
  const admin = tags.includes("administrator");
  return {
    admin,
    monitor: admin || tags.includes("monitoring"),
    policies: admin || tags.includes("policymaker"),
  };
}

function authorization() {
  try {
    const c = JSON.parse(sessionStorage.getItem(KEY) || "null");
    return c && c.auth;
  } catch {
    return null;
  }
}

export function logout() {
  sessionStorage.removeItem(KEY);
}

// login checks the credentials with /api/whoami and keeps them only when
// the API accepts them; it returns whoami's answer.
export async function login(user, password) {
  const auth = basic(user, password);
  const me = await request("GET", "/api/whoami", undefined, { auth });
  const tags = Array.isArray(me.tags) ? me.tags : String(me.tags || "").split(",").map((t) => t.trim()).filter(Boolean);
  sessionStorage.setItem(KEY, JSON.stringify({ user: me.name || user, auth, tags }));
  return me;
}

// onUnauthorized is called when a stored login stops working (the user
// was deleted or its password changed); main.js sends the tab to log-in.
export let onUnauthorized = () => {};
export function setOnUnauthorized(fn) {
  onUnauthorized = fn;
}

// request sends one API call and returns its parsed JSON (null for an
// empty answer such as 201 or 204). opts.headers adds headers, opts.auth
// overrides the stored credentials, opts.raw returns the text.
export async function request(method, path, body, opts = {}) {
  const headers = { Accept: "application/json", ...(opts.headers || {}) };
  const auth = opts.auth || authorization();
  if (auth) headers.Authorization = auth;
  const init = { method, headers, credentials: "omit", cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = typeof body === "string" ? body : JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, "network error", "the broker did not answer (" + e.message + ")");
  }
  const text = await resp.text();
  if (!resp.ok) {
    let error = "", reason = "";
    try {
      const j = JSON.parse(text);
      error = j.error || "";
      reason = typeof j.reason === "string" ? j.reason : JSON.stringify(j.reason || "");
    } catch {
      reason = text.trim().slice(0, 300);
    }
    const err = new ApiError(resp.status, error, reason);
    // A 401 also answers a user whose tags do not allow an endpoint; only
    // a refused login (or none at all) ends the session.
    if (resp.status === 401 && !opts.auth && (!reason || /login failed/i.test(reason))) onUnauthorized(err);
    throw err;
  }
  if (opts.raw) return text;
  return text ? JSON.parse(text) : null;
}

export const get = (path, opts) => request("GET", path, undefined, opts);
export const put = (path, body, opts) => request("PUT", path, body === undefined ? {} : body, opts);
export const post = (path, body, opts) => request("POST", path, body === undefined ? {} : body, opts);
export const del = (path, opts) => request("DELETE", path, undefined, opts);

// path builds an API path from segments, each percent-encoded: the
// default vhost "/" becomes %2F as the API expects.
export function path(...segments) {
  return "/api/" + segments.map(encodeURIComponent).join("/");
}

// query appends parameters, leaving out empty ones.
export function query(p, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
  }
  const s = q.toString();
  return s ? p + "?" + s : p;
}
