// The application shell: log-in, the navigation bar, the vhost selector
// and a router over location.hash (#/queues, #/queue/%2F/name ...). Each
// page module exports render(ctx); ctx.every registers a refresh that the
// router stops when the page is left.

import * as api from "./api.js";
import { h, replace, message, route } from "./dom.js";
import * as overview from "./page-overview.js";
import * as lists from "./page-lists.js";
import * as queue from "./page-queue.js";
import * as exchange from "./page-exchange.js";
import * as admin from "./page-admin.js";
import * as plugins from "./page-plugins.js";
import * as shovels from "./page-shovels.js";
import * as federation from "./page-federation.js";
import * as definitions from "./page-definitions.js";
import * as detail from "./page-detail.js";

export const REFRESH_MS = 5000;

// The operator's refresh interval, as RabbitMQ's UI offers it, kept per
// browser: every page's refresh waits this long ("0": never).
const REFRESH_KEY = "warren.refresh";
const REFRESHES = [["5000", "Refresh every 5 seconds"], ["10000", "Refresh every 10 seconds"],
  ["30000", "Refresh every 30 seconds"], ["60000", "Refresh every minute"], ["0", "Do not refresh"]];
const refreshMS = () => {
  const v = localStorage.getItem(REFRESH_KEY);
  return REFRESHES.some(([ms]) => ms === v) ? Number(v) : REFRESH_MS;
};

const pages = {
  overview: overview.render,
  connections: lists.connections,
  channels: lists.channels,
  exchanges: lists.exchanges,
  queues: lists.queues,
  consumers: lists.consumers,
  streams: lists.streams,
  queue: queue.render,
  exchange: exchange.render,
  node: detail.node,
  connection: detail.connection,
  channel: detail.channel,
  user: detail.user,
  vhost: detail.vhost,
  users: admin.users,
  vhosts: admin.vhosts,
  permissions: admin.permissions,
  limits: admin.limits,
  cluster: admin.cluster,
  policies: admin.policies,
  plugins: plugins.render,
  shovels: shovels.render,
  federation: federation.render,
  definitions: definitions.render,
};

const nav = [
  ["overview", "Overview"], ["connections", "Connections"], ["channels", "Channels"],
  ["exchanges", "Exchanges"], ["queues", "Queues"], ["consumers", "Consumers"],
  ["streams", "Streams"], ["shovels", "Shovels"], ["federation", "Federation"],
  ["users", "Admin"], ["plugins", "Plugins"], ["definitions", "Definitions"],
];
const adminPages = new Set(["users", "vhosts", "permissions", "limits", "policies", "cluster"]);

const root = document.getElementById("app");
let timers = [];
// generation counts page renders: a page still loading when the operator
// moves on must not start refreshing behind the next one.
let generation = 0;

function stopTimers() {
  timers.forEach(clearInterval);
  timers = [];
}

// The vhost the lists are limited to ("" for all), kept per tab.
const VHOST_KEY = "warren.vhost";
export const currentVHost = () => sessionStorage.getItem(VHOST_KEY) || "";

function parseHash() {
  const parts = location.hash.replace(/^#\/?/, "").split("/");
  const segs = parts.map((p) => {
    try {
      return decodeURIComponent(p);
    } catch {
      return p;
    }
  });
  return { page: segs[0] || "overview", params: segs.slice(1) };
}

async function show() {
  stopTimers();
  const gen = ++generation;
  const { page, params } = parseHash();
  if (page === "login" || !api.savedUser()) return showLogin();
  const renderPage = pages[page];
  const main = h("main", { id: "page", dataset: { page } });
  replace(root, header(page), main);
  if (!renderPage) {
    main.append(h("h2", {}, "Not found"), h("p", {}, "No page called " + page + "."));
    return;
  }
  const ctx = {
    main, params, vhost: currentVHost,
    every(fn, ms) {
      const wait = ms || refreshMS();
      if (gen !== generation || wait === 0) return;
      timers.push(setInterval(() => {
        if (gen === generation && !document.hidden) fn();
      }, wait));
    },
  };
  try {
    await renderPage(ctx);
  } catch (e) {
    if (gen !== generation) return;
    const m = h("div", { id: "page-error" });
    message(m, "error", e.message);
    main.append(m);
  }
}

// visibleNav leaves out what the user's tags would be refused: the admin
// pages but policies need administrator, policies policymaker, plugins
// and shovels monitoring, federation monitoring or policymaker (its links
// need the one, its upstreams the other), definitions administrator.
function visibleNav() {
  const may = api.can();
  return nav.flatMap(([p, label]) => {
    if (p === "users") return may.admin ? [[p, label]] : may.policies ? [["policies", "Policies"]] : [];
    if ((p === "plugins" || p === "shovels") && !may.monitor) return [];
    if (p === "federation" && !may.monitor && !may.policies) return [];
    if (p === "definitions" && !may.admin) return [];
    return [[p, label]];
  });
}

function header(page) {
  const links = visibleNav().map(([p, label]) => {
    const active = p === page || (p === "users" && adminPages.has(page)) || (p === "policies" && page === "policies") ||
      (p === "queues" && page === "queue") || (p === "exchanges" && page === "exchange") ||
      (p === "connections" && page === "connection") || (p === "channels" && page === "channel") ||
      (p === "overview" && page === "node");
    return h("a", { href: route(p), className: active ? "active" : "", id: "nav-" + p }, label);
  });
  const vsel = h("select", { id: "vhost-select", title: "Virtual host shown in the lists" }, h("option", { value: "" }, "All vhosts"));
  vsel.addEventListener("change", () => {
    sessionStorage.setItem(VHOST_KEY, vsel.value);
    show();
  });
  api.get("/api/vhosts").then((vs) => {
    for (const v of vs) vsel.append(h("option", { value: v.name }, v.name));
    if (currentVHost() && !vs.some((v) => v.name === currentVHost())) {
      // The chosen vhost is gone (deleted, or not this user's): all again.
      sessionStorage.removeItem(VHOST_KEY);
      show();
      return;
    }
    vsel.value = currentVHost();
  }).catch(() => {});
  const sub = adminPages.has(page) && api.can().admin
    ? h("nav", { className: "subnav" }, [["users", "Users"], ["vhosts", "Virtual hosts"], ["permissions", "Permissions"], ["limits", "Limits"], ["policies", "Policies"],
      ["cluster", "Cluster"]]
      .map(([p, label]) => h("a", { href: route(p), className: p === page ? "active" : "", id: "subnav-" + p }, label)))
    : null;
  const rsel = h("select", { id: "refresh-select", title: "How often the page refreshes" },
    REFRESHES.map(([ms, label]) => h("option", { value: ms }, label)));
  rsel.value = String(refreshMS());
  rsel.addEventListener("change", () => {
    localStorage.setItem(REFRESH_KEY, rsel.value);
    show();
  });
  return h("header", {},
    h("div", { className: "bar" },
      h("a", { href: route("overview"), className: "brand" }, "Warren"),
      h("nav", { className: "main" }, links),
      h("div", { className: "who" },
        h("label", {}, "Virtual host ", vsel),
        rsel,
        h("span", { id: "whoami" }, api.savedUser()),
        h("button", { type: "button", className: "small", id: "logout", on: { click: () => {
          api.logout();
          location.hash = route("login");
        } } }, "Log out"))),
    sub);
}

function showLogin(reason) {
  stopTimers();
  generation++;
  const user = h("input", { id: "login-user", name: "username", autocomplete: "username", required: true });
  const pass = h("input", { id: "login-password", type: "password", name: "password", autocomplete: "current-password" });
  const status = h("div", { id: "login-error", hidden: true });
  if (reason) message(status, "error", reason);
  const button = h("button", { type: "submit", id: "login-submit" }, "Log in");
  const form = h("form", { id: "login", className: "login" },
    h("h1", {}, "Warren"),
    h("p", {}, "Log in with a Warren user that has a management tag."),
    h("label", { className: "field" }, h("span", {}, "Username"), user),
    h("label", { className: "field" }, h("span", {}, "Password"), pass),
    button, status);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    button.disabled = true;
    try {
      await api.login(user.value, pass.value);
      const { page } = parseHash();
      if (page === "login" || !location.hash) location.hash = route("overview");
      else show();
    } catch (e) {
      // The API's reason is "Login failed" for a wrong password, or says
      // why else (a loopback-only user from elsewhere, a missing tag).
      const why = e.reason && !/^login failed$/i.test(e.reason) ? e.reason : "wrong username or password";
      message(status, "error", e.status === 401 ? `Login failed: ${why}.` : e.message);
    } finally {
      button.disabled = false;
    }
  });
  replace(root, form);
  user.focus();
}

api.setOnUnauthorized((e) => {
  api.logout();
  showLogin("Your login is no longer accepted: " + e.message);
});

window.addEventListener("hashchange", show);
show();
