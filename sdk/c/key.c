/*
 * c-key: an exchange type written in C against warren_plugin.h, without
 * libc. x-c-key routes a message to the bindings whose key equals its
 * routing key, or, when the exchange was declared with the argument
 * x-key-header, equals that header's value (a message without the header
 * falls back to its routing key). Build it (see README.md):
 *
 *   clang --target=wasm32 -O2 -nostdlib -Wl,--no-entry -I .. -o c-key.wasm key.c
 *
 * State is fixed-size: 64 exchanges of 128 bindings, keys of 255 bytes.
 */
#include "warren_plugin.h"

#define MAX_EXCHANGES 64
#define MAX_BINDINGS 128

typedef struct {
    int used;
    uint32_t id;
    uint8_t key_len;
    uint8_t key[255];
} binding;

typedef struct {
    int used;
    int top;               /* slots at or past top are free */
    char header[256];      /* x-key-header, NUL-terminated; "" when none */
    binding bindings[MAX_BINDINGS];
} exchange;

static exchange exchanges[MAX_EXCHANGES];
static uint8_t in_buf[65536];
static uint8_t out_buf[8 + 4 * MAX_BINDINGS];
static warren_writer out = {out_buf, sizeof out_buf, 0, 0};

/* clang may turn loops into calls to these; there is no libc to supply them. */
void *memset(void *d, int c, size_t n) {
    uint8_t *p = d;
    while (n--) *p++ = (uint8_t)c;
    return d;
}

void *memcpy(void *d, const void *s, size_t n) {
    uint8_t *p = d;
    const uint8_t *q = s;
    while (n--) *p++ = *q++;
    return d;
}

int32_t warren_abi_version(void) { return WARREN_ABI_VERSION; }

uint8_t *warren_buffer(int32_t size) { return size <= (int32_t)sizeof in_buf ? in_buf : 0; }

int64_t warren_describe(int32_t len) {
    (void)len;
    return warren_describe_one(&out, "c-key", "1.0.0", WARREN_FEATURE_HEADERS, "x-c-key");
}

static exchange *find(uint32_t id) { return id < MAX_EXCHANGES && exchanges[id].used ? &exchanges[id] : 0; }

/* Reads x-key-header from a definition into header (256 bytes); -1 with
 * an ERROR written to out when it is not a non-empty string. */
static int key_header(const warren_definition *d, char *header, int64_t *err) {
    warren_value v;
    header[0] = 0;
    if (!warren_table_get(d->args, "x-key-header", &v)) return 0;
    if (v.kind != 'S' || v.data.len == 0 || v.data.len > 255) {
        *err = warren_error(&out, WARREN_PRECONDITION_FAILED, "x-key-header must be a non-empty string");
        return -1;
    }
    memcpy(header, v.data.ptr, v.data.len);
    header[v.data.len] = 0;
    return 0;
}

int64_t warren_validate_declare(int32_t len) {
    warren_definition d;
    char header[256];
    int64_t err = 0;
    if (warren_read_definition(in_buf, (uint32_t)len, &d) < 0) return warren_fault(&out, "bad definition");
    if (key_header(&d, header, &err) < 0) return err;
    return 0;
}

int64_t warren_create(int32_t len) {
    warren_definition d;
    int64_t err = 0;
    if (warren_read_definition(in_buf, (uint32_t)len, &d) < 0) return warren_fault(&out, "bad definition");
    if (d.exchange >= MAX_EXCHANGES) return warren_error(&out, WARREN_PRECONDITION_FAILED, "too many exchanges");
    exchange *x = &exchanges[d.exchange];
    memset(x, 0, sizeof *x);
    if (key_header(&d, x->header, &err) < 0) return err;
    x->used = 1;
    return 0;
}

int64_t warren_delete(int32_t len) {
    warren_reader r = warren_reader_make(in_buf, (uint32_t)len);
    exchange *x = find(warren_u32(&r));
    if (x) x->used = 0;
    return 0;
}

int64_t warren_add_binding(int32_t len) {
    warren_binding b;
    if (warren_read_binding(in_buf, (uint32_t)len, &b) < 0) return warren_fault(&out, "bad binding");
    exchange *x = find(b.exchange);
    if (!x) return warren_fault(&out, "unknown exchange");
    for (int i = 0; i < MAX_BINDINGS; i++) {
        binding *s = &x->bindings[i];
        if (!s->used) {
            if (i >= x->top) x->top = i + 1;
            s->used = 1;
            s->id = b.binding;
            s->key_len = (uint8_t)b.key.len;
            memcpy(s->key, b.key.ptr, b.key.len);
            return 0;
        }
    }
    return warren_error(&out, WARREN_PRECONDITION_FAILED, "too many bindings");
}

int64_t warren_remove_bindings(int32_t len) {
    warren_reader r = warren_reader_make(in_buf, (uint32_t)len);
    exchange *x = find(warren_u32(&r));
    uint32_t n = warren_u32(&r);
    for (uint32_t k = 0; k < n && x && !r.err; k++) {
        uint32_t id = warren_u32(&r);
        for (int i = 0; i < x->top; i++)
            if (x->bindings[i].used && x->bindings[i].id == id) x->bindings[i].used = 0;
    }
    return 0;
}

int64_t warren_route(int32_t len) {
    warren_route_in m;
    if (warren_read_route(in_buf, (uint32_t)len, &m) < 0) return warren_fault(&out, "bad route record");
    exchange *x = find(m.exchange);
    if (!x) return warren_fault(&out, "unknown exchange");
    warren_bytes key = m.key, headers;
    warren_value v;
    if (x->header[0] && warren_route_headers(&m, &headers) && warren_table_get(headers, x->header, &v) &&
        v.kind == 'S')
        key = v.data;
    warren_route_begin(&out);
    for (int i = 0; i < x->top; i++) {
        binding *s = &x->bindings[i];
        warren_bytes k = {s->key, s->key_len};
        if (s->used && warren_bytes_eq(k, key)) warren_route_add(&out, s->id);
    }
    return warren_route_end(&out);
}

int64_t warren_info(int32_t len) {
    warren_reader r = warren_reader_make(in_buf, (uint32_t)len);
    exchange *x = find(warren_u32(&r));
    if (!x) return 0;
    int64_t n = 0;
    for (int i = 0; i < x->top; i++) n += x->bindings[i].used;
    uint32_t t = warren_info_begin(&out);
    warren_table_put_i64(&out, "bindings", n);
    return warren_info_end(&out, t);
}
