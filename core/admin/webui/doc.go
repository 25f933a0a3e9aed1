// Package webui is Warren's web management UI: a single page of plain
// HTML, CSS and JavaScript (ES modules, no framework, no build step),
// embedded in the binary with go:embed and served by the admin listener
// at / with its assets under /ui/. It works offline: nothing is loaded
// from anywhere but the broker itself.
//
// The UI is only a client of the management API in core/admin. It holds
// no state on the server and has no endpoint of its own; what an operator
// can do in it is exactly what the API lets that user do.
//
// # Files
//
// handler.go serves static/ with its security headers. In static/:
// index.html loads main.js (log-in, navigation, the router over
// location.hash), which renders one page-*.js at a time; api.js is the
// API client, dom.js the only way elements are made, table.js the
// sortable, filterable, paged listing, chart.js the canvas charts,
// forms.js and bindings.js the shared forms, format.js numbers and rates.
// Tests: handler_test.go here, and tests/webui_test.go, which drives the
// UI in headless chromium.
//
// # Invariants
//
//   - Credentials never become a cookie. The UI asks for a Warren user
//     and password, keeps them in the tab's sessionStorage and sends them
//     with every API call as an Authorization header from fetch, with
//     credentials "omit" so the browser neither attaches cookies nor
//     caches or prompts for basic-auth itself. A page from another site
//     cannot make the browser send that header, and the API refuses
//     cross-origin state changes and bodies that are not application/json
//     anyway (core/admin/crosssite.go).
//   - Data is never HTML. Every name, payload and reason the API returns
//     reaches the page through textContent, element properties or
//     setAttribute on non-event attributes (static/dom.js refuses on*
//     attributes); innerHTML is not used anywhere. A queue named
//     <img src=x onerror=alert(1)> is shown as those characters.
//   - The Content-Security-Policy sent with every file allows scripts,
//     styles and connections from this origin only and no inline script,
//     so an injection that slipped past the rule above would still not
//     run, and no other site may frame the UI.
//   - Large listings stay on the server: the queue, exchange, connection
//     and channel tables ask the API for one page at a time (page,
//     page_size, name, use_regex, sort, sort_reverse), so 10,000 queues
//     cost the browser one page of rows.
package webui
