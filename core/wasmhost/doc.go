// Package wasmhost is Warren's WebAssembly exchange-type host: it loads
// plugin modules with wazero, checks them against the routing ABI
// (sdk/ABI.md), and adapts each exchange type a plugin provides to
// core/exchange's Type and Router, so the broker routes through a plugin
// exactly as through a built-in type.
//
// The host is part of the broker; core/broker drives it. It knows
// nothing of the broker but core/exchange, core/message and core/reply,
// and nothing of plugins/: the plugins Warren ships are guests, built for
// wasip1 against sdk/ like any author's, and reach the broker as modules
// (plugins/shipped embeds them). TestNoImportRunsBackUp checks both. The
// module rewriter is internal/wasmpatch.
//
// # Using it from the broker
//
// The broker keeps the plugins it enabled and the exchange types they
// registered (core/broker/plugins.go):
//
//	host, err := wasmhost.New(wasmhost.Config{
//		CacheDir:       cfg.PluginCacheDir(),
//		Logger:         log,
//		PluginSettings: settings,        // broker.toml's and warrenctl's, by plugin
//		LookupType:     registry.Lookup, // for type_exists and validate-as
//		OnDisabled: func(name, reason string) {
//			// the host gave up on a failing plugin: unregister it as below
//		},
//	})
//
//	// warrenctl plugins enable content-router
//	p, err := host.Load(ctx, "content-router", wasm)
//	err = p.Register(registry)                              // all its types or none
//	for _, t := range p.Info().Types { vhosts.TypeBack(t) } // rebuild existing exchanges
//
//	// the same, with another module: a live upgrade
//	next, err := host.Upgrade(ctx, p, wasm) // refused: p runs on
//
//	// warrenctl plugins disable content-router
//	if p.Exchanges() > 0 && !force { refuse }
//	p.Unregister(registry)
//	for _, t := range p.Info().Types { vhosts.TypeGone(t) } // routers deleted, bindings kept
//	p.Close()
//
//	// warrenctl plugins list, and plugins configure
//	show(p.Info())                             // enabled
//	info, err := host.Inspect(ctx, name, wasm) // available, not enabled
//	err = host.Configure(name, values)         // the plugin may refuse them
//
//	// /metrics
//	m := p.RouteMetrics()
//
// # Loading
//
// Load rewrites the module (package wasmpatch: a budget check at every
// loop head and at the entry of functions that call), compiles it with wazero's compiler (the
// compilation cache on disk makes every later load of the same module,
// including after a broker restart, skip compilation), checks its imports,
// instantiates it once, checks warren_abi_version (refusing another major
// version, naming both), checks the exports' signatures and reads the
// description. The plugin's name must be the name it is loaded under.
//
// # Instances and state
//
// An instance runs one call at a time, so a plugin has a pool of them
// (Config.PoolSize, by default one per core), grown in the background when
// publishers contend and never on a publisher's goroutine. Every instance
// must hold the same exchanges and bindings. Mutations (create, delete,
// bind, unbind, policy) are serialized per plugin: each runs on one
// instance and, if the plugin accepts it, enters an op log with an epoch.
// Taking an instance from the pool compares its epoch with the plugin's
// (one atomic load on the route path) and applies the ops it missed. A new
// instance replays the current state instead: exchanges, their policies
// and their bindings in the order they were added. The log is trimmed
// below the oldest live instance's epoch.
//
// core/exchange's invariants do the rest: Route never runs with a
// mutation of the same router, so a router's table of binding ids needs no
// lock, while other exchanges may change at any time, which the epochs
// handle.
//
// # The route path
//
// Route takes an instance (a compare-and-swap on a pool slot, starting at
// a slot derived from the publisher's Result so a publisher keeps the
// instance whose memory its core has cached), writes the route record
// straight into the instance's exchange buffer, calls warren_route with a
// cached function handle and CallWithStack, maps the binding ids it
// answers to the router's bindings, and gives the instance back. Nothing
// on that path allocates.
//
// # Containment
//
//   - Memory: each instance's linear memory is capped (Config.
//     MemoryLimitBytes); on Linux it is one mmap'ed region of that size,
//     so growth never copies and a memory bomb hits the cap in
//     milliseconds.
//   - Time: a watchdog samples every instance's call counter four times
//     per Config.CallTimeout; a call seen running for a whole timeout is
//     marked, and the yield its checks call every wasmpatch.Budget of them
//     fails it (microseconds later; no other goroutine writes the
//     module's globals). wazero's own mechanism, WithCloseOnContextDone, starts a
//     goroutine per call (about 1 µs and 3 allocations), which this
//     avoids.
//   - The scheduler: Go cannot preempt compiled wasm, so a guest that
//     loops would keep its P, and a garbage collection waiting to stop
//     the world would wait for it, with every other goroutine (the
//     watchdog too) stopped. The yield every wasmpatch.Budget checks
//     calls runtime.Gosched, so a looping guest holds up the rest of the
//     broker for tens of microseconds at most, on any number of Ps.
//   - Failures (a trap, a timeout, a fault the plugin reports, output that
//     breaks the ABI, an instance that cannot start) fail the one call,
//     discard the instance and start a replacement; Config.FailureLimit
//     failures within Config.FailureWindow disable the plugin, log why and
//     call Config.OnDisabled. A disabled plugin's routers answer 406.
//   - Replies a plugin gives (406 for a bad argument, say) are not
//     failures: they reach the client as AMQP replies.
//
// Lock order: Plugin.mutMu, then Plugin.stateMu, then pool.mu. The
// broker calls a router's mutations with the exchange's lock held (see
// LOCKS.md at the repository's root), never a vhost-wide one.
package wasmhost
