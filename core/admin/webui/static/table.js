// A listing table with a name filter, sortable columns and pages.
//
// Server mode (opts.fetchPage) asks the API for one page at a time with
// RabbitMQ's page, page_size, name, use_regex, sort and sort_reverse, and
// renders the answer's items; this is what keeps 10,000 queues cheap.
// Client mode (opts.fetchAll) is for listings the API does not page
// (consumers, users, policies...): it filters, sorts and pages in the tab,
// with the same controls and the same answer shape.
//
// columns: [{label, key (sort key: a dotted path into the item, as the
// API's sort takes), render(item) -> node|string, className}]

import { h, replace, message } from "./dom.js";

const PAGE_SIZES = [20, 50, 100, 500];

export class Table {
  constructor(opts) {
    this.opts = opts;
    this.state = { page: 1, pageSize: opts.pageSize || 20, name: "", regex: false, sort: opts.sort || "", reverse: false };
    this.seq = 0;
    this.build();
  }

  build() {
    const id = this.opts.id;
    this.filter = h("input", { type: "search", placeholder: "Filter by name", className: "filter", id: id + "-filter",
      on: { input: () => this.debounce() } });
    this.regex = h("input", { type: "checkbox", id: id + "-regex", on: { change: () => this.reload(true) } });
    this.sizeSel = h("select", { id: id + "-size", on: { change: () => this.reload(true) } },
      PAGE_SIZES.map((n) => h("option", { value: String(n) }, String(n))));
    this.sizeSel.value = String(this.state.pageSize);
    this.prev = h("button", { type: "button", className: "small", id: id + "-prev", on: { click: () => this.go(-1) } }, "‹ Prev");
    this.next = h("button", { type: "button", className: "small", id: id + "-next", on: { click: () => this.go(1) } }, "Next ›");
    this.info = h("span", { className: "pageinfo", id: id + "-info" });
    this.err = h("div", { hidden: true });
    this.thead = h("thead");
    this.tbody = h("tbody");
    this.table = h("table", { className: "list", id: id }, this.thead, this.tbody);
    this.el = h("div", { className: "listing" },
      h("div", { className: "controls" },
        this.filter,
        h("label", { className: "check" }, this.regex, " Regex"),
        h("label", {}, "Page size ", this.sizeSel),
        this.prev, this.info, this.next),
      this.err, this.table);
    this.renderHead();
  }

  debounce() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.reload(true), 250);
  }

  go(delta) {
    this.state.page = Math.max(1, this.state.page + delta);
    this.reload();
  }

  toggleSort(key) {
    if (this.state.sort === key) this.state.reverse = !this.state.reverse;
    else {
      this.state.sort = key;
      this.state.reverse = false;
    }
    // A new order makes the old page number meaningless.
    this.state.page = 1;
    this.renderHead();
    this.reload();
  }

  renderHead() {
    const cells = this.opts.columns.map((c) => {
      if (!c.key) return h("th", { className: c.className || "" }, c.label);
      const mark = this.state.sort === c.key ? (this.state.reverse ? " ▼" : " ▲") : "";
      return h("th", { className: "sortable " + (c.className || ""), dataset: { sort: c.key },
        on: { click: () => this.toggleSort(c.key) } }, c.label + mark);
    });
    replace(this.thead, h("tr", {}, cells));
  }

  // reload fetches the current page; resetPage goes back to page 1 (a
  // new filter or page size).
  async reload(resetPage) {
    const s = this.state;
    s.name = this.filter.value.trim();
    s.regex = this.regex.checked;
    s.pageSize = Number(this.sizeSel.value);
    if (resetPage) s.page = 1;
    const seq = ++this.seq;
    let answer;
    try {
      answer = this.opts.fetchPage ? await this.opts.fetchPage(s) : this.localPage(await this.opts.fetchAll(), s);
      // An API that ignores the page parameters answers the bare array.
      if (Array.isArray(answer)) answer = this.localPage(answer, s);
    } catch (e) {
      if (seq !== this.seq) return;
      // A page past the end (the list shrank under us): go to page 1.
      if (e.status === 400 && s.page > 1 && /page_out_of_range|pagination/i.test(e.message)) {
        s.page = 1;
        return this.reload();
      }
      message(this.err, "error", e.message);
      this.table.dataset.state = "error";
      return;
    }
    if (seq !== this.seq) return; // an older answer arriving late
    message(this.err, "", "");
    this.render(answer);
  }

  // localPage filters, sorts and pages a whole listing as the API would.
  localPage(items, s) {
    const total = items.length;
    const nameOf = this.opts.nameOf || ((x) => x.name || "");
    if (s.name) {
      let test;
      if (s.regex) {
        const re = new RegExp(s.name, "i");
        test = (x) => re.test(nameOf(x));
      } else {
        const needle = s.name.toLowerCase();
        test = (x) => nameOf(x).toLowerCase().includes(needle);
      }
      items = items.filter(test);
    }
    if (s.sort) {
      const get = (x) => s.sort.split(".").reduce((o, k) => (o == null ? undefined : o[k]), x);
      items = items.slice().sort((a, b) => compare(get(a), get(b)));
    }
    if (s.reverse) items = items.slice().reverse();
    const pageCount = Math.max(1, Math.ceil(items.length / s.pageSize));
    const page = Math.min(s.page, pageCount);
    return {
      items: items.slice((page - 1) * s.pageSize, page * s.pageSize),
      page, page_count: pageCount, filtered_count: items.length, total_count: total,
    };
  }

  render(a) {
    const s = this.state;
    s.page = a.page || 1;
    const rows = (a.items || []).map((item) =>
      h("tr", {}, this.opts.columns.map((c) => h("td", { className: c.className || "" }, c.render ? c.render(item) : item[c.key]))));
    if (!rows.length) {
      rows.push(h("tr", {}, h("td", { className: "empty", colSpan: this.opts.columns.length },
        s.name ? "Nothing matches the filter." : this.opts.empty || "None.")));
    }
    replace(this.tbody, rows);
    const pages = Math.max(1, a.page_count || 1);
    this.prev.disabled = s.page <= 1;
    this.next.disabled = s.page >= pages;
    const filtered = a.filtered_count ?? (a.items || []).length;
    const total = a.total_count ?? filtered;
    replace(this.info, `Page ${s.page} of ${pages} · ${filtered}` + (filtered !== total ? ` of ${total}` : "") + " items");
    this.table.dataset.state = "loaded";
    this.table.dataset.total = String(total);
  }
}

function compare(a, b) {
  if (a === b) return 0;
  if (a === undefined || a === null) return 1;
  if (b === undefined || b === null) return -1;
  if (typeof a === "number" && typeof b === "number") return a - b;
  return String(a).localeCompare(String(b));
}

// serverPage makes a fetchPage for an API listing path.
export function serverPage(api, pathFn) {
  return (s) => api.get(api.query(pathFn(), {
    page: s.page, page_size: s.pageSize, name: s.name,
    use_regex: s.name && s.regex ? "true" : "", sort: s.sort, sort_reverse: s.reverse ? "true" : "",
  }));
}
