package wasmhost

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/warrenmq/warren/core/wasmhost/internal/wasmpatch"
	"github.com/warrenmq/warren/sdk/abi"
)

// The exports an instance calls, by index into instance.fns.
const (
	fnBuffer = iota
	fnDescribe
	fnValidateDeclare
	fnCreate
	fnDelete
	fnValidateBinding
	fnAddBinding
	fnRemoveBindings
	fnPolicyChanged
	fnRoute
	fnInfo
	fnIdle
	fnSettingsChanged
	numFns
)

var fnNames = [numFns]string{
	fnBuffer:          abi.ExportBuffer,
	fnDescribe:        abi.ExportDescribe,
	fnValidateDeclare: abi.ExportValidateDeclare,
	fnCreate:          abi.ExportCreate,
	fnDelete:          abi.ExportDelete,
	fnValidateBinding: abi.ExportValidateBinding,
	fnAddBinding:      abi.ExportAddBinding,
	fnRemoveBindings:  abi.ExportRemoveBindings,
	fnPolicyChanged:   abi.ExportPolicyChanged,
	fnRoute:           abi.ExportRoute,
	fnInfo:            abi.ExportInfo,
	fnIdle:            abi.ExportIdle,
	fnSettingsChanged: abi.ExportSettingsChanged,
}

var fnRequired = [numFns]bool{
	fnBuffer: true, fnDescribe: true, fnCreate: true, fnAddBinding: true,
	fnRemoveBindings: true, fnRoute: true,
}

// interruptExport names the budget global wasmpatch adds; see the package
// doc.
const interruptExport = "warren_interrupt"

// initialBuffer is the exchange buffer asked for at instantiation.
const initialBuffer = 4096

// instance is one instantiated module. Exactly one goroutine uses it at a
// time: the one that took it from the pool. The watchdog and the memory
// allocator only read seq and set interrupted.
type instance struct {
	p      *Plugin
	mod    api.Module
	mem    api.Memory
	fns    [numFns]api.Function
	stack  []uint64
	ctx    context.Context // carries the instance to host functions
	linear *mmapMemory     // nil with wazero's own allocator
	stderr *lineLog

	// The exchange buffer: where inputs are written.
	bufPtr, bufCap uint32

	// seq counts call starts and ends: odd while a call runs. The
	// watchdog compares it between ticks to spot a call that does not end.
	seq atomic.Uint64
	// interrupted marks a call the watchdog found past its deadline: the
	// yield the module calls every wasmpatch.Budget checks fails it.
	interrupted atomic.Bool

	// epoch is the last op of the plugin's log applied to this instance.
	epoch atomic.Uint64
	// calls since the last warren_idle, and the pool slot it lives in;
	// only the holder touches them.
	calls uint64
	home  uint32
	// routes counts the route calls made on this instance, to time one
	// in routeTimingEvery; only the holder touches it.
	routes uint64

	// Watchdog bookkeeping, touched by the watchdog goroutine only.
	wdSeq   uint64
	wdTicks int
}

type instanceKey struct{}

func (in *instance) inCall() bool { return in.seq.Load()&1 == 1 }

// failure is a fault of the plugin rather than of the message: a trap, a
// call past its deadline, an exit, a fault the plugin reported or output
// that breaks the ABI. The instance that failed is discarded and the
// failure counts towards disabling the plugin.
type failure struct {
	export string
	kind   string // "trap", "timeout", "exit", "fault", "malformed", "instantiate"
	detail string
}

func (f *failure) Error() string {
	if f.export == "" {
		return f.kind + ": " + f.detail
	}
	return f.kind + " in " + f.export + ": " + f.detail
}

func malformed(export, format string, args ...any) *failure {
	return &failure{export: export, kind: "malformed", detail: fmt.Sprintf(format, args...)}
}

// newInstance instantiates the plugin's module and runs its initializer.
// The caller brings it to the plugin's state (replay).
func (p *Plugin) newInstance() (*instance, error) {
	h := p.h
	in := &instance{p: p, stack: make([]uint64, 2)}
	in.ctx = context.WithValue(context.Background(), instanceKey{}, in)
	ctx := in.ctx
	in.stderr = &lineLog{p: p, level: abi.LogWarn}
	if a := in.memoryAllocator(); a != nil {
		ctx = experimental.WithMemoryAllocator(ctx, a)
	}
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions(). // _initialize runs below, under the watchdog
		WithSysWalltime().
		WithSysNanotime().
		WithNanosleep(in.sleep).
		WithRandSource(rand.Reader).
		WithStdout(&lineLog{p: p, level: abi.LogInfo}).
		WithStderr(in.stderr)
	mod, err := p.rt.InstantiateModule(ctx, p.compiled, cfg)
	if err != nil {
		if in.linear != nil {
			in.linear.release()
		}
		return nil, &failure{kind: "instantiate", detail: firstLine(err.Error())}
	}
	in.mod = mod
	in.mem = mod.Memory()
	for i, name := range fnNames {
		if f := mod.ExportedFunction(name); f != nil {
			in.fns[i] = f
		}
	}
	// The budget global proves the module was patched (its checks call
	// yield); only the module itself writes it.
	if _, ok := mod.ExportedGlobal(interruptExport).(api.MutableGlobal); !ok || in.mem == nil {
		in.close()
		return nil, &failure{kind: "instantiate", detail: "module lost its memory or interrupt global"}
	}
	h.watch(in)
	if f := mod.ExportedFunction(abi.ExportInitialize); f != nil {
		if err := in.callRaw(f, abi.ExportInitialize); err != nil {
			in.close()
			return nil, err
		}
	}
	return in, nil
}

// close releases the instance. It must not be in a call.
func (in *instance) close() {
	in.p.h.unwatch(in)
	_ = in.mod.Close(context.Background())
	if in.linear != nil {
		in.linear.release()
	}
}

// sleep is the instance's nanosleep: real, but cut short when the watchdog
// interrupts the call, so a plugin cannot hide from its deadline in a sleep.
func (in *instance) sleep(ns int64) {
	for ns > 0 && !in.interrupted.Load() {
		d := min(time.Duration(ns), 10*time.Millisecond)
		time.Sleep(d)
		ns -= int64(d)
	}
}

// version calls warren_abi_version.
func (in *instance) version() (uint32, error) {
	f := in.mod.ExportedFunction(abi.ExportVersion)
	if err := in.callRaw(f, abi.ExportVersion); err != nil {
		return 0, err
	}
	return uint32(in.stack[0]), nil
}

// callRaw calls f with in.stack as it stands, under the watchdog.
func (in *instance) callRaw(f api.Function, name string) error {
	in.seq.Add(1)
	err := f.CallWithStack(in.ctx, in.stack)
	in.seq.Add(1)
	if err != nil {
		return in.classify(name, err)
	}
	return nil
}

// classify turns an error of a call into a failure.
func (in *instance) classify(name string, err error) *failure {
	if in.interrupted.Load() {
		return &failure{export: name, kind: "timeout", detail: fmt.Sprintf("still running after %v", in.p.h.cfg.CallTimeout)}
	}
	// The module's last words (a Go panic or fatal error, a Rust panic)
	// say more than the trap.
	last := ""
	if in.stderr != nil && in.stderr.last != "" {
		last = in.stderr.last + "; "
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		return &failure{export: name, kind: "exit", detail: fmt.Sprintf("%smodule exited with code %d", last, exit.ExitCode())}
	}
	detail := last + firstLine(err.Error())
	// A guest out of memory traps (a Go guest's runtime aborts); say how
	// full the memory was, since the trap alone does not.
	if limit := in.p.h.cfg.MemoryLimitBytes; in.mem != nil && uint64(in.mem.Size()) >= limit/2 {
		detail += fmt.Sprintf(" (memory at %d MiB of its %d MiB limit)", in.mem.Size()>>20, limit>>20)
	}
	return &failure{export: name, kind: "trap", detail: detail}
}

// input returns n bytes of the instance's exchange buffer to write an input
// into, growing the buffer through warren_buffer when it is too small. The
// first input of an instance asks for the buffer, so warren_buffer is the
// first export called after warren_abi_version, as the ABI promises.
func (in *instance) input(n uint32) ([]byte, error) {
	if n > in.bufCap || in.bufPtr == 0 {
		size := max(n, initialBuffer)
		in.stack[0] = uint64(size)
		if err := in.callRaw(in.fns[fnBuffer], abi.ExportBuffer); err != nil {
			return nil, err
		}
		ptr := uint32(in.stack[0])
		if ptr == 0 {
			return nil, errTooLarge{n}
		}
		if _, ok := in.mem.Read(ptr, size); !ok {
			return nil, malformed(abi.ExportBuffer, "buffer of %d bytes at %#x lies outside memory", size, ptr)
		}
		in.bufPtr, in.bufCap = ptr, size
	}
	b, ok := in.mem.Read(in.bufPtr, n)
	if !ok {
		return nil, malformed(abi.ExportBuffer, "buffer at %#x lies outside memory", in.bufPtr)
	}
	return b, nil
}

// errTooLarge reports an input the plugin would not make room for: the
// message fails, the instance is fine.
type errTooLarge struct{ n uint32 }

func (e errTooLarge) Error() string {
	return fmt.Sprintf("the plugin has no room for an input of %d bytes", e.n)
}

// call runs export fn on the n input bytes already in the buffer and returns
// its raw output, which aliases guest memory until the next call. A missing
// optional export answers empty output (OK).
func (in *instance) call(fn int, n uint32) ([]byte, error) {
	f := in.fns[fn]
	if f == nil {
		return nil, nil
	}
	in.stack[0] = uint64(n)
	if err := in.callRaw(f, fnNames[fn]); err != nil {
		return nil, err
	}
	ptr, size := abi.UnpackResult(in.stack[0])
	if size == 0 {
		return nil, nil
	}
	out, ok := in.mem.Read(ptr, size)
	if !ok {
		return nil, malformed(fnNames[fn], "output of %d bytes at %#x lies outside memory", size, ptr)
	}
	return out, nil
}

// run writes input, calls fn and decodes the output's status.
func (in *instance) run(fn int, input []byte) (abi.Output, error) {
	if in.fns[fn] == nil {
		return abi.Output{}, nil
	}
	dst, err := in.input(uint32(len(input)))
	if err != nil {
		return abi.Output{}, err
	}
	copy(dst, input)
	out, err := in.call(fn, uint32(len(input)))
	if err != nil {
		return abi.Output{}, err
	}
	return readOutput(fn, out)
}

// readOutput decodes an output's status; a fault or an unreadable output
// is a failure.
func readOutput(fn int, out []byte) (abi.Output, error) {
	o, err := abi.ReadOutput(out)
	if err != nil {
		return o, malformed(fnNames[fn], "%v", err)
	}
	if o.Status == abi.StatusFault {
		return o, &failure{export: fnNames[fn], kind: "fault", detail: string(o.Text)}
	}
	return o, nil
}

// ---- host functions (module warren_v1) ----

func instanceOf(ctx context.Context) *instance {
	in, _ := ctx.Value(instanceKey{}).(*instance)
	return in
}

// instantiateHostModule defines warren_v1 in rt.
func (h *Host) instantiateHostModule(ctx context.Context, rt wazero.Runtime) error {
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	b := rt.NewHostModuleBuilder(abi.ImportModule)
	b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
		in := instanceOf(ctx)
		if in == nil {
			return
		}
		if msg, ok := mod.Memory().Read(uint32(stack[1]), uint32(stack[2])); ok {
			in.p.logLine(int(int32(stack[0])), msg)
		}
	}), []api.ValueType{i32, i32, i32}, nil).WithParameterNames("level", "ptr", "len").Export(abi.HostLog)

	b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, stack []uint64) {
		stack[0] = uint64(time.Since(h.started))
	}), nil, []api.ValueType{i64}).Export(abi.HostClockMonotonic)

	b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, stack []uint64) {
		stack[0] = uint64(time.Now().UnixNano())
	}), nil, []api.ValueType{i64}).Export(abi.HostClockWall)

	b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
		settings := abi.EmptyTable
		if in := instanceOf(ctx); in != nil {
			settings = *in.p.settings.Load()
		}
		ptr, capacity := uint32(stack[0]), uint32(stack[1])
		if uint32(len(settings)) <= capacity {
			mod.Memory().Write(ptr, settings)
		}
		stack[0] = uint64(len(settings))
	}), []api.ValueType{i32, i32}, []api.ValueType{i32}).WithParameterNames("ptr", "cap").Export(abi.HostConfig)

	b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
		name, ok := mod.Memory().Read(uint32(stack[0]), uint32(stack[1]))
		exists := false
		if ok && h.cfg.LookupType != nil {
			_, exists = h.cfg.LookupType(string(name))
		}
		stack[0] = 0
		if exists {
			stack[0] = 1
		}
	}), []api.ValueType{i32, i32}, []api.ValueType{i32}).WithParameterNames("ptr", "len").Export(abi.HostTypeExists)

	if _, err := b.Instantiate(ctx); err != nil {
		return err
	}

	// The yield every patched module imports (package wasmpatch): fail a
	// call the watchdog marked, else let the scheduler run other
	// goroutines, the watchdog among them, and renew the budget.
	_, err := rt.NewHostModuleBuilder(wasmpatch.ImportModule).NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, _ api.Module, stack []uint64) {
			if in := instanceOf(ctx); in != nil && in.interrupted.Load() {
				panic(errInterrupted)
			}
			runtime.Gosched()
			stack[0] = wasmpatch.Budget
		}), nil, []api.ValueType{i32}).Export(wasmpatch.ImportYield).Instantiate(ctx)
	return err
}

// errInterrupted fails a call the watchdog interrupted, from yield.
var errInterrupted = errors.New("interrupted by the watchdog")

// lineLog turns a module's stdout or stderr into log lines (a Go guest's
// panic and fatal error reports land there). It remembers the last line
// that reports a panic or fatal error, for the failure it precedes.
type lineLog struct {
	p       *Plugin
	level   int
	partial []byte
	last    string
}

func (w *lineLog) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if len(w.partial) < 4096 {
				w.partial = append(w.partial, b[:min(len(b), 4096-len(w.partial))]...)
			}
			break
		}
		line := b[:i]
		if len(w.partial) > 0 {
			line = append(w.partial, line...)
			w.partial = w.partial[:0]
		}
		if len(bytes.TrimSpace(line)) > 0 {
			switch {
			case isLastWords(line):
				w.last = string(line)
				w.p.logLine(w.level, line)
			case w.last != "":
				// The stack trace after the last words: kept for
				// debugging, out of the way otherwise.
				w.p.logLine(abi.LogDebug, line)
			default:
				w.p.logLine(w.level, line)
			}
		}
		b = b[i+1:]
	}
	return n, nil
}

// isLastWords spots the line a dying guest prints: Go's "panic: ..." and
// "fatal error: ...", Rust's "panicked at".
func isLastWords(line []byte) bool {
	return bytes.HasPrefix(line, []byte("panic: ")) || bytes.HasPrefix(line, []byte("fatal error: ")) ||
		bytes.Contains(line, []byte("panicked at"))
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}
