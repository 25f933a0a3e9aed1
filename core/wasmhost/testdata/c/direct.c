/*
 * direct-c: the direct exchange type (binding key == routing key) written
 * in C against sdk/warren_plugin.h, without libc. The host's tests build
 * it with clang when clang can target wasm32:
 *
 *   clang --target=wasm32 -O2 -nostdlib -Wl,--no-entry -I sdk -o direct-c.wasm direct.c
 *
 * State is fixed-size: 64 exchanges of 256 bindings, keys of 255 bytes.
 */
#include "warren_plugin.h"

#define MAX_EXCHANGES 64
#define MAX_BINDINGS 256

typedef struct {
    int used;
    uint32_t id;
    uint8_t key_len;
    uint8_t key[255];
} binding;

typedef struct {
    int used;
    int top; /* slots at or past top are free */
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

uint8_t *warren_buffer(int32_t size) {
    return size <= (int32_t)sizeof in_buf ? in_buf : 0;
}

int64_t warren_describe(int32_t len) {
    (void)len;
    return warren_describe_one(&out, "direct-c", "1.0.0", 0, "x-direct-c");
}

static exchange *find(uint32_t id) {
    return id < MAX_EXCHANGES && exchanges[id].used ? &exchanges[id] : 0;
}

int64_t warren_create(int32_t len) {
    warren_definition d;
    if (warren_read_definition(in_buf, (uint32_t)len, &d) < 0) return warren_fault(&out, "bad definition");
    if (d.exchange >= MAX_EXCHANGES) return warren_error(&out, WARREN_PRECONDITION_FAILED, "too many exchanges");
    memset(&exchanges[d.exchange], 0, sizeof(exchange));
    exchanges[d.exchange].used = 1;
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
        for (int i = 0; i < MAX_BINDINGS; i++)
            if (x->bindings[i].used && x->bindings[i].id == id) x->bindings[i].used = 0;
    }
    return 0;
}

int64_t warren_route(int32_t len) {
    warren_route_in m;
    if (warren_read_route(in_buf, (uint32_t)len, &m) < 0) return warren_fault(&out, "bad route record");
    exchange *x = find(m.exchange);
    if (!x) return warren_fault(&out, "unknown exchange");
    if (warren_bytes_eq_str(m.key, "hello-log")) warren_log_str(WARREN_LOG_INFO, "hello from C");
    warren_route_begin(&out);
    for (int i = 0; i < x->top; i++) {
        binding *s = &x->bindings[i];
        warren_bytes key = {s->key, s->key_len};
        if (s->used && warren_bytes_eq(key, m.key)) warren_route_add(&out, s->id);
    }
    return warren_route_end(&out);
}
