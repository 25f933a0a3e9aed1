/*
 * warren_plugin.h - Warren's routing ABI v1.1 for C, and for Rust, Zig or
 * any language that can read a C header. sdk/ABI.md is the normative text;
 * this header gives its constants, the host functions, the export
 * declarations and small helpers to read inputs and write outputs.
 *
 * A plugin is a wasm32 module. With clang and no libc:
 *
 *   clang --target=wasm32 -O2 -nostdlib -Wl,--no-entry -o my-plugin.wasm my-plugin.c
 *
 * (with wasi-libc, use --target=wasm32-wasi and -mexec-model=reactor).
 * Define the exports you need: warren_abi_version, warren_buffer,
 * warren_describe, warren_create, warren_add_binding,
 * warren_remove_bindings and warren_route are required; the others are
 * optional. Everything marked (1.1) needs a module that answers
 * WARREN_ABI_VERSION (1.1) and a broker that speaks 1.1; sdk/c has an
 * example plugin and its build command. This header declares each with its export name, so defining a
 * function of the same name exports it.
 *
 * Every export but warren_abi_version and warren_buffer takes the length of
 * its input, which the host wrote into the exchange buffer (the pointer the
 * last warren_buffer call returned), and returns its output as
 * WARREN_RESULT(ptr, len), or 0 for "OK, nothing to say". The output must
 * stay readable until the next call into the module.
 *
 * The header is freestanding: it needs only <stdint.h> and <stddef.h>.
 */
#ifndef WARREN_PLUGIN_H
#define WARREN_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- versions and names ---- */

#define WARREN_ABI_MAJOR 1
#define WARREN_ABI_MINOR 1
#define WARREN_ABI_VERSION ((WARREN_ABI_MAJOR << 16) | WARREN_ABI_MINOR)
/* A module that answers WARREN_ABI_VERSION_1_0 from warren_abi_version
 * loads on 1.0 brokers too, and must then use nothing marked (1.1). */
#define WARREN_ABI_VERSION_1_0 0x00010000

/* Features (describe): what route receives besides the routing key. */
#define WARREN_FEATURE_HEADERS 0x1u    /* the property list, for its headers */
#define WARREN_FEATURE_PROPERTIES 0x2u /* the property list */
#define WARREN_FEATURE_BODY 0x4u       /* the body */

/* Output status, the first byte of a non-empty output. */
#define WARREN_STATUS_OK 0    /* payload follows */
#define WARREN_STATUS_ERROR 1 /* u16 reply code, str16 text */
#define WARREN_STATUS_FAULT 2 /* str16 text: the plugin is broken */

/* Route actions after the binding ids. */
#define WARREN_ACTION_VIA 1         /* u64 hold ms, str8 exchange type */
#define WARREN_ACTION_SET_HEADERS 2 /* (1.1) table; only after a via with a hold */

/* Checks in the OK payload of a validate answer (1.1). */
#define WARREN_CHECK_VALIDATE_AS 1 /* str8 exchange type */

/* Exchange flags in a definition record. */
#define WARREN_FLAG_DURABLE 0x1
#define WARREN_FLAG_AUTO_DELETE 0x2
#define WARREN_FLAG_INTERNAL 0x4

/* Destination kinds in a binding record. */
#define WARREN_DEST_QUEUE 0
#define WARREN_DEST_EXCHANGE 1

/* Id in validate records, where nothing has an id yet. */
#define WARREN_NONE 0xffffffffu

/* Setting kinds (describe), AMQP field type octets; 0 accepts anything. */
#define WARREN_SETTING_ANY 0
#define WARREN_SETTING_BOOL 't'
#define WARREN_SETTING_INT 'l'
#define WARREN_SETTING_FLOAT 'd'
#define WARREN_SETTING_STRING 'S'
#define WARREN_SETTING_ARRAY 'A'
#define WARREN_SETTING_TABLE 'F'

/* Reply codes a plugin may answer with. */
#define WARREN_ACCESS_REFUSED 403
#define WARREN_NOT_FOUND 404
#define WARREN_RESOURCE_LOCKED 405
#define WARREN_PRECONDITION_FAILED 406
#define WARREN_INTERNAL_ERROR 541

/* Log levels of warren_log. */
#define WARREN_LOG_DEBUG 0
#define WARREN_LOG_INFO 1
#define WARREN_LOG_WARN 2
#define WARREN_LOG_ERROR 3

/* The i64 an export returns for output at ptr of len bytes. */
#define WARREN_RESULT(ptr, len) \
    ((int64_t)(((uint64_t)(uint32_t)(uintptr_t)(ptr) << 32) | (uint64_t)(uint32_t)(len)))

#if defined(__wasm__)
#define WARREN_EXPORT(name) __attribute__((export_name(name)))
#define WARREN_IMPORT(name) __attribute__((import_module("warren_v1"), import_name(name)))
#else
#define WARREN_EXPORT(name)
#define WARREN_IMPORT(name)
#endif

/* ---- host functions (module "warren_v1") ---- */

/* Writes a line to the broker's log at a WARREN_LOG_* level. */
WARREN_IMPORT("log") void warren_log(int32_t level, const char *msg, int32_t len);
/* Nanoseconds of the host's monotonic clock (from an arbitrary point). */
WARREN_IMPORT("clock_monotonic") int64_t warren_clock_monotonic(void);
/* Nanoseconds since the Unix epoch. */
WARREN_IMPORT("clock_wall") int64_t warren_clock_wall(void);
/* Copies the plugin's settings (an AMQP field table, length prefix
 * included) to buf if it fits in cap bytes; returns its size either way. */
WARREN_IMPORT("config") int32_t warren_config(uint8_t *buf, int32_t cap);
/* (1.1) 1 if clients can declare exchanges of the type named by the len
 * bytes at name (built in, or of an enabled plugin), else 0. A module that
 * calls it loads only on a 1.1 broker. */
WARREN_IMPORT("type_exists") int32_t warren_type_exists(const char *name, int32_t len);

/* ---- exports (define those you need) ---- */

WARREN_EXPORT("warren_abi_version") int32_t warren_abi_version(void);
/* Returns a buffer of at least size bytes for the host's inputs, or 0. */
WARREN_EXPORT("warren_buffer") uint8_t *warren_buffer(int32_t size);
WARREN_EXPORT("warren_describe") int64_t warren_describe(int32_t len);
WARREN_EXPORT("warren_validate_declare") int64_t warren_validate_declare(int32_t len);
WARREN_EXPORT("warren_create") int64_t warren_create(int32_t len);
WARREN_EXPORT("warren_delete") int64_t warren_delete(int32_t len);
WARREN_EXPORT("warren_validate_binding") int64_t warren_validate_binding(int32_t len);
WARREN_EXPORT("warren_add_binding") int64_t warren_add_binding(int32_t len);
WARREN_EXPORT("warren_remove_bindings") int64_t warren_remove_bindings(int32_t len);
WARREN_EXPORT("warren_policy_changed") int64_t warren_policy_changed(int32_t len);
WARREN_EXPORT("warren_route") int64_t warren_route(int32_t len);
WARREN_EXPORT("warren_info") int64_t warren_info(int32_t len);
WARREN_EXPORT("warren_idle") int64_t warren_idle(int32_t len);
/* (1.1) The input is the new settings table; an ERROR refuses the change. */
WARREN_EXPORT("warren_settings_changed") int64_t warren_settings_changed(int32_t len);

/* ---- reading inputs ---- */

/* A byte string inside an input (not NUL-terminated). */
typedef struct {
    const uint8_t *ptr;
    uint32_t len;
} warren_bytes;

/* A reader over a record; the first overrun sets err and every later
 * read returns zeros, so check err once at the end. */
typedef struct {
    const uint8_t *p;
    uint32_t len;
    uint32_t off;
    int err;
} warren_reader;

static inline warren_reader warren_reader_make(const uint8_t *p, uint32_t len) {
    warren_reader r = {p, len, 0, 0};
    return r;
}

static inline const uint8_t *warren_take(warren_reader *r, uint32_t n) {
    if (r->err || n > r->len - r->off) {
        r->err = 1;
        return 0;
    }
    const uint8_t *p = r->p + r->off;
    r->off += n;
    return p;
}

static inline uint8_t warren_u8(warren_reader *r) {
    const uint8_t *p = warren_take(r, 1);
    return p ? p[0] : 0;
}

static inline uint16_t warren_u16(warren_reader *r) {
    const uint8_t *p = warren_take(r, 2);
    return p ? (uint16_t)(p[0] | p[1] << 8) : 0;
}

static inline uint32_t warren_u32(warren_reader *r) {
    const uint8_t *p = warren_take(r, 4);
    return p ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24 : 0;
}

static inline uint64_t warren_u64(warren_reader *r) {
    uint64_t lo = warren_u32(r);
    return lo | (uint64_t)warren_u32(r) << 32;
}

static inline warren_bytes warren_str8(warren_reader *r) {
    warren_bytes b = {0, warren_u8(r)};
    b.ptr = warren_take(r, b.len);
    return b;
}

static inline warren_bytes warren_bytes32(warren_reader *r) {
    warren_bytes b = {0, warren_u32(r)};
    b.ptr = warren_take(r, b.len);
    return b;
}

static inline uint32_t warren_be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* An AMQP field table with its big-endian 4-byte length. */
static inline warren_bytes warren_table(warren_reader *r) {
    warren_bytes b = {0, 0};
    if (r->err || r->len - r->off < 4) {
        r->err = 1;
        return b;
    }
    b.len = 4 + warren_be32(r->p + r->off);
    b.ptr = warren_take(r, b.len);
    return b;
}

/* The definition record (validate_declare, create). */
typedef struct {
    uint32_t exchange; /* WARREN_NONE in validate_declare */
    warren_bytes vhost, name, type;
    uint8_t flags;
    warren_bytes args; /* field table */
} warren_definition;

static inline int warren_read_definition(const uint8_t *in, uint32_t len, warren_definition *d) {
    warren_reader r = warren_reader_make(in, len);
    d->exchange = warren_u32(&r);
    d->vhost = warren_str8(&r);
    d->name = warren_str8(&r);
    d->type = warren_str8(&r);
    d->flags = warren_u8(&r);
    d->args = warren_table(&r);
    return r.err ? -1 : 0;
}

/* The binding record (validate_binding, add_binding). */
typedef struct {
    uint32_t exchange;
    uint32_t binding; /* WARREN_NONE in validate_binding */
    uint8_t dest_kind;
    warren_bytes dest, key, args;
} warren_binding;

static inline int warren_read_binding(const uint8_t *in, uint32_t len, warren_binding *b) {
    warren_reader r = warren_reader_make(in, len);
    b->exchange = warren_u32(&r);
    b->binding = warren_u32(&r);
    b->dest_kind = warren_u8(&r);
    b->dest = warren_str8(&r);
    b->key = warren_str8(&r);
    b->args = warren_table(&r);
    return r.err ? -1 : 0;
}

/* The route record. */
typedef struct {
    uint32_t exchange;
    warren_bytes key;
    uint16_t flags;     /* AMQP basic property flags (0 without the feature) */
    warren_bytes props; /* raw AMQP property list */
    warren_bytes body;
} warren_route_in;

static inline int warren_read_route(const uint8_t *in, uint32_t len, warren_route_in *m) {
    warren_reader r = warren_reader_make(in, len);
    m->exchange = warren_u32(&r);
    m->key = warren_str8(&r);
    m->flags = warren_u16(&r);
    m->props = warren_bytes32(&r);
    m->body = warren_bytes32(&r);
    return r.err ? -1 : 0;
}

/* The headers table of a route input's property list (with the headers
 * or properties feature); 1 if the message has one. */
static inline int warren_route_headers(const warren_route_in *m, warren_bytes *table) {
    uint32_t off = 0;
    if (!(m->flags & 0x2000)) return 0;
    /* content-type and content-encoding, short strings, come first */
    for (uint16_t flag = 0x8000; flag > 0x2000; flag >>= 1) {
        if (!(m->flags & flag)) continue;
        if (off >= m->props.len) return 0;
        off += 1 + m->props.ptr[off];
    }
    if (off > m->props.len || m->props.len - off < 4) return 0;
    uint32_t n = warren_be32(m->props.ptr + off);
    if (n > m->props.len - off - 4) return 0;
    table->ptr = m->props.ptr + off;
    table->len = 4 + n;
    return 1;
}

static inline int warren_bytes_eq(warren_bytes a, warren_bytes b) {
    if (a.len != b.len) return 0;
    for (uint32_t i = 0; i < a.len; i++)
        if (a.ptr[i] != b.ptr[i]) return 0;
    return 1;
}

static inline int warren_bytes_eq_str(warren_bytes a, const char *s) {
    uint32_t i = 0;
    for (; s[i]; i++)
        if (i >= a.len || a.ptr[i] != (uint8_t)s[i]) return 0;
    return i == a.len;
}

/* One AMQP field value: its type octet and its bytes (strings and byte
 * arrays without their length; tables and arrays with it). */
typedef struct {
    uint8_t kind;
    warren_bytes data;
} warren_value;

/* Reads the value at p (type octet first); returns its size, 0 if it does
 * not fit in n bytes or its type is unknown. */
static inline uint32_t warren_read_value(const uint8_t *p, uint32_t n, warren_value *v) {
    uint32_t fixed;
    if (n == 0) return 0;
    v->kind = p[0];
    switch (p[0]) {
    case 't': case 'b': case 'B': fixed = 1; break;
    case 's': case 'u': fixed = 2; break;
    case 'I': case 'i': case 'f': fixed = 4; break;
    case 'l': case 'd': case 'T': fixed = 8; break;
    case 'D': fixed = 5; break;
    case 'V': v->data.ptr = p + 1; v->data.len = 0; return 1;
    case 'S': case 'x': case 'A': case 'F': {
        if (n < 5) return 0;
        uint32_t len = warren_be32(p + 1);
        if (len > n - 5) return 0;
        if (p[0] == 'A' || p[0] == 'F') {
            v->data.ptr = p + 1;
            v->data.len = 4 + len;
        } else {
            v->data.ptr = p + 5;
            v->data.len = len;
        }
        return 5 + len;
    }
    default: return 0;
    }
    if (n < 1 + fixed) return 0;
    v->data.ptr = p + 1;
    v->data.len = fixed;
    return 1 + fixed;
}

/* Finds key in a field table (length prefix included); 1 if found. */
static inline int warren_table_get(warren_bytes table, const char *key, warren_value *v) {
    if (table.len < 4) return 0;
    uint32_t n = warren_be32(table.ptr);
    if (n > table.len - 4) return 0;
    const uint8_t *p = table.ptr + 4, *end = p + n;
    while (p < end) {
        warren_bytes k = {p + 1, p[0]};
        if (k.len > (uint32_t)(end - p) - 1) return 0;
        p += 1 + k.len;
        uint32_t size = warren_read_value(p, (uint32_t)(end - p), v);
        if (size == 0) return 0;
        if (warren_bytes_eq_str(k, key)) return 1;
        p += size;
    }
    return 0;
}

/* ---- writing outputs ---- */

/* A writer into a buffer the plugin owns; an overflow sets err. */
typedef struct {
    uint8_t *buf;
    uint32_t cap;
    uint32_t len;
    int err;
} warren_writer;

static inline warren_writer warren_writer_make(uint8_t *buf, uint32_t cap) {
    warren_writer w = {buf, cap, 0, 0};
    return w;
}

static inline void warren_put(warren_writer *w, const void *p, uint32_t n) {
    if (w->err || n > w->cap - w->len) {
        w->err = 1;
        return;
    }
    for (uint32_t i = 0; i < n; i++) w->buf[w->len + i] = ((const uint8_t *)p)[i];
    w->len += n;
}

static inline void warren_put_u8(warren_writer *w, uint8_t v) { warren_put(w, &v, 1); }

static inline void warren_put_u16(warren_writer *w, uint16_t v) {
    uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    warren_put(w, b, 2);
}

static inline void warren_put_u32(warren_writer *w, uint32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    warren_put(w, b, 4);
}

static inline void warren_put_u64(warren_writer *w, uint64_t v) {
    warren_put_u32(w, (uint32_t)v);
    warren_put_u32(w, (uint32_t)(v >> 32));
}

static inline uint32_t warren_strlen(const char *s) {
    uint32_t n = 0;
    while (s[n]) n++;
    return n;
}

static inline void warren_put_str8(warren_writer *w, const char *s) {
    uint32_t n = warren_strlen(s);
    if (n > 255) n = 255;
    warren_put_u8(w, (uint8_t)n);
    warren_put(w, s, n);
}

/* A str8 of bytes read from an input (cut at 255). */
static inline void warren_put_bytes8(warren_writer *w, warren_bytes b) {
    uint32_t n = b.len > 255 ? 255 : b.len;
    warren_put_u8(w, (uint8_t)n);
    warren_put(w, b.ptr, n);
}

static inline void warren_put_str16(warren_writer *w, const char *s) {
    uint32_t n = warren_strlen(s);
    if (n > 65535) n = 65535;
    warren_put_u16(w, (uint16_t)n);
    warren_put(w, s, n);
}

/* The writer's output as an export's result (a FAULT if it overflowed
 * cannot be written either: overflow returns 0, which the host reads as
 * an empty OK; size your buffers). */
static inline int64_t warren_writer_result(const warren_writer *w) {
    return w->err || w->len == 0 ? 0 : WARREN_RESULT(w->buf, w->len);
}

/* Writes an ERROR output: the client sees code and text. */
static inline int64_t warren_error(warren_writer *w, uint16_t code, const char *text) {
    w->len = 0;
    w->err = 0;
    warren_put_u8(w, WARREN_STATUS_ERROR);
    warren_put_u16(w, code);
    warren_put_str16(w, text);
    return warren_writer_result(w);
}

/* Writes a FAULT output: the host discards this instance. */
static inline int64_t warren_fault(warren_writer *w, const char *text) {
    w->len = 0;
    w->err = 0;
    warren_put_u8(w, WARREN_STATUS_FAULT);
    warren_put_str16(w, text);
    return warren_writer_result(w);
}

/* Starts a route answer: call warren_route_add for each binding id, or
 * warren_route_via alone, then return warren_route_end. */
static inline void warren_route_begin(warren_writer *w) {
    w->len = 0;
    w->err = 0;
    warren_put_u8(w, WARREN_STATUS_OK);
    warren_put_u32(w, 0);
}

static inline void warren_route_add(warren_writer *w, uint32_t binding) {
    warren_put_u32(w, binding);
    if (!w->err) {
        uint32_t n = (w->len - 5) / 4;
        w->buf[1] = (uint8_t)n;
        w->buf[2] = (uint8_t)(n >> 8);
        w->buf[3] = (uint8_t)(n >> 16);
        w->buf[4] = (uint8_t)(n >> 24);
    }
}

static inline void warren_route_via(warren_writer *w, uint64_t hold_ms, const char *type) {
    warren_put_u8(w, WARREN_ACTION_VIA);
    warren_put_u64(w, hold_ms);
    warren_put_str8(w, type);
}

static inline int64_t warren_route_end(const warren_writer *w) {
    if (w->len == 5 && !w->err) return 0; /* no bindings: routes nowhere */
    return warren_writer_result(w);
}

/* ---- field tables (AMQP, big-endian), for set-headers and info ---- */

static inline void warren_put_be32(warren_writer *w, uint32_t v) {
    uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    warren_put(w, b, 4);
}

/* Starts a table; returns where, for warren_table_end. */
static inline uint32_t warren_table_begin(warren_writer *w) {
    uint32_t start = w->len;
    warren_put_be32(w, 0);
    return start;
}

/* Sets the length of the table begun at start. */
static inline void warren_table_end(warren_writer *w, uint32_t start) {
    if (w->err) return;
    uint32_t n = w->len - start - 4;
    w->buf[start] = (uint8_t)(n >> 24);
    w->buf[start + 1] = (uint8_t)(n >> 16);
    w->buf[start + 2] = (uint8_t)(n >> 8);
    w->buf[start + 3] = (uint8_t)n;
}

/* Entries: a short-string name, a type octet, the value. */
static inline void warren_table_put_str(warren_writer *w, const char *name, const char *value) {
    warren_put_str8(w, name);
    warren_put_u8(w, 'S');
    uint32_t n = warren_strlen(value);
    warren_put_be32(w, n);
    warren_put(w, value, n);
}

static inline void warren_table_put_i64(warren_writer *w, const char *name, int64_t value) {
    warren_put_str8(w, name);
    warren_put_u8(w, 'l');
    warren_put_be32(w, (uint32_t)((uint64_t)value >> 32));
    warren_put_be32(w, (uint32_t)value);
}

/* A void value: in set-headers, removes the header. */
static inline void warren_table_put_void(warren_writer *w, const char *name) {
    warren_put_str8(w, name);
    warren_put_u8(w, 'V');
}

/* (1.1) After warren_route_via with a hold of at least 1 ms: rewrites the
 * held message's headers. Write the table's entries between
 * warren_route_set_headers_begin and warren_table_end. */
static inline uint32_t warren_route_set_headers_begin(warren_writer *w) {
    warren_put_u8(w, WARREN_ACTION_SET_HEADERS);
    return warren_table_begin(w);
}

/* An info answer: warren_info_begin, entries, warren_info_end. */
static inline uint32_t warren_info_begin(warren_writer *w) {
    w->len = 0;
    w->err = 0;
    warren_put_u8(w, WARREN_STATUS_OK);
    return warren_table_begin(w);
}

static inline int64_t warren_info_end(warren_writer *w, uint32_t start) {
    warren_table_end(w, start);
    return warren_writer_result(w);
}

/* ---- validate answers with checks (1.1) ---- */

/* Starts a validate answer; add checks, then return warren_checks_end
 * (an answer without checks is the empty OK). */
static inline void warren_checks_begin(warren_writer *w) {
    w->len = 0;
    w->err = 0;
    warren_put_u8(w, WARREN_STATUS_OK);
}

/* Asks the broker to validate the same declare or binding as exchange
 * type `type` would, after this answer. */
static inline void warren_check_validate_as(warren_writer *w, warren_bytes type) {
    warren_put_u8(w, WARREN_CHECK_VALIDATE_AS);
    warren_put_bytes8(w, type);
}

static inline int64_t warren_checks_end(const warren_writer *w) {
    if (w->len == 1 && !w->err) return 0;
    return warren_writer_result(w);
}

/* Writes a describe answer with one exchange type and no settings. For
 * more types or settings, write the fields yourself (ABI.md, describe). */
static inline int64_t warren_describe_one(warren_writer *w, const char *name, const char *version,
                                          uint32_t features, const char *type) {
    w->len = 0;
    w->err = 0;
    warren_put_u8(w, WARREN_STATUS_OK);
    warren_put_str8(w, name);
    warren_put_str8(w, version);
    warren_put_u32(w, features);
    warren_put_u8(w, 1);
    warren_put_str8(w, type);
    warren_put_u8(w, 0);
    return warren_writer_result(w);
}

static inline void warren_log_str(int32_t level, const char *msg) {
    warren_log(level, msg, (int32_t)warren_strlen(msg));
}

#ifdef __cplusplus
}
#endif

#endif /* WARREN_PLUGIN_H */
