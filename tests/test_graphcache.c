/* The backend-independent part of ACL graph mode (src/graphcache): property records and matching
 * (every recorded field of a node and of each source forces a miss when it changes, except the
 * addresses of VIEW nodes), the LRU (order, eviction, destroy callbacks), the GGML_CANN_* parsing
 * and the query length. Tensors get fake data addresses inside a static array: nothing runs. */
#include <stdbool.h>

#include "graph.h"
#include "graphcache/graphcache.h"
#include "harness.h"
#include "log.h"

static char arena[1 << 16];

/* Data addresses for every node of g, in order: a view (or a node writing into another tensor, like
 * CPY) lies in its owner's memory, other nodes get fresh slices of arena after offset `off`. */
static void place(struct llm_graph *g, size_t off)
{
    for (int i = 0; i < g->n_nodes; i++) {
        struct llm_tensor *t = g->nodes[i];
        if (t->view_src) {
            t->data = (char *)t->view_src->data + t->view_offs;
            continue;
        }
        t->data = arena + off;
        off += (llm_nbytes(t) + 63) & ~(size_t)63;
    }
    CHECK(off <= sizeof arena, "arena too small");
}

static struct llm_tensor *leaf(struct llm_ctx *ctx, enum llm_type type, int64_t ne0, int64_t ne1,
                               size_t off)
{
    struct llm_tensor *t = llm_new_tensor_2d(ctx, type, ne0, ne1);
    t->data = arena + off;
    return t;
}

/* One attention step of n tokens, 4 heads of 4 over a 2-head KV cache of 8 cells: matmul, reshape,
 * rope, permute, views of the cache, then fused attention or matmul + soft_max. */
static struct llm_graph *build_block(struct llm_ctx *ctx, int64_t n, bool fused)
{
    struct llm_tensor *x = leaf(ctx, LLM_TYPE_F32, 16, n, 0);
    struct llm_tensor *wq = leaf(ctx, LLM_TYPE_F16, 16, 16, 1024);
    struct llm_tensor *pos = leaf(ctx, LLM_TYPE_I32, n, 1, 2048);
    struct llm_tensor *kc = leaf(ctx, LLM_TYPE_F16, 8, 8, 3072);
    struct llm_tensor *vc = leaf(ctx, LLM_TYPE_F16, 8, 8, 4096);
    struct llm_tensor *mask = leaf(ctx, LLM_TYPE_F32, 8, n, 5120);
    struct llm_tensor *q = llm_reshape_3d(ctx, llm_mul_mat(ctx, wq, x), 4, 4, n);
    q = llm_permute(ctx, llm_rope(ctx, q, pos, NULL, 4, 0, 128, 10000.0f, 1.0f), 0, 2, 1, 3);
    struct llm_tensor *k = llm_view_3d(ctx, kc, 4, 8, 2, kc->nb[1], 4 * kc->nb[0], 0);
    struct llm_tensor *v = llm_view_3d(ctx, vc, 4, 8, 2, vc->nb[1], 4 * vc->nb[0], 0);
    struct llm_tensor *out = fused ? llm_flash_attn(ctx, q, k, v, mask, 0.5f)
                                   : llm_soft_max(ctx, llm_mul_mat(ctx, k, q), mask, 0.5f);
    struct llm_graph *g = llm_graph_build(&out, 1);
    place(g, 8192);
    return g;
}

/* Flip the lowest bit of a recorded field of a tensor (address, enum, shape, stride or op param
 * alike), check whether g still matches p, then restore the field and check it matches again. */
static void flip_check(const struct llm_graph_props *p, const struct llm_graph *g, void *field,
                       size_t size, bool want_match, const char *what, int i, int j)
{
    unsigned char saved[16];
    memcpy(saved, field, size);
    *(unsigned char *)field ^= 1;
    CHECK(llm_graph_props_match(p, g) == want_match, "%s [%d][%d]: want %s", what, i, j,
          want_match ? "match" : "miss");
    memcpy(field, saved, size);
    CHECK(llm_graph_props_match(p, g), "%s [%d][%d] restored", what, i, j);
}

#define FLIP(p, g, field, want_match, what, i, j) \
    flip_check(p, g, &(field), sizeof(field), want_match, what, i, j)

/* Every field of a FLASH_ATTN node and of each of its four sources (all leaves, so only the
 * source records see them). */
static void test_node_fields(void)
{
    struct llm_ctx *ctx = llm_ctx_new(16);
    struct llm_tensor *src[4] = {
        leaf(ctx, LLM_TYPE_F32, 4, 3, 0), leaf(ctx, LLM_TYPE_F16, 4, 8, 256),
        leaf(ctx, LLM_TYPE_F16, 4, 8, 512), leaf(ctx, LLM_TYPE_F32, 8, 3, 768),
    };
    struct llm_tensor *fa = llm_flash_attn(ctx, src[0], src[1], src[2], src[3], 0.5f);
    struct llm_graph *g = llm_graph_build(&fa, 1);
    place(g, 1024);
    struct llm_graph_props p;
    CHECK(llm_graph_props_record(&p, g));
    CHECK_EQ_INT(p.n_nodes, 1);
    CHECK(llm_graph_props_match(&p, g), "identical graph");

    FLIP(&p, g, fa->data, false, "node address", 0, 0);
    FLIP(&p, g, fa->op, false, "node op", 0, 0);
    FLIP(&p, g, fa->type, false, "node type", 0, 0);
    for (int d = 0; d < LLM_MAX_DIMS; d++) {
        FLIP(&p, g, fa->ne[d], false, "node ne", d, 0);
        FLIP(&p, g, fa->nb[d], false, "node nb", d, 0);
    }
    for (int i = 0; i < LLM_MAX_OP_PARAMS; i++)
        FLIP(&p, g, fa->op_params[i], false, "op_params", i, 0);
    for (int s = 0; s < 4; s++) {
        FLIP(&p, g, src[s]->data, false, "src address", s, 0);
        FLIP(&p, g, src[s]->type, false, "src type", s, 0);
        for (int d = 0; d < LLM_MAX_DIMS; d++) {
            FLIP(&p, g, src[s]->ne[d], false, "src ne", s, d);
            FLIP(&p, g, src[s]->nb[d], false, "src nb", s, d);
        }
        fa->src[s] = NULL;
        CHECK(!llm_graph_props_match(&p, g), "src %d present, then absent", s);
        fa->src[s] = src[s];
    }
    llm_graph_props_clear(&p);
    CHECK(p.n_nodes == 0 && p.nodes == NULL);

    /* absent at record time: NULL / COUNT / zeros, and a present source later is a miss */
    fa->src[3] = NULL;
    CHECK(llm_graph_props_record(&p, g));
    const struct llm_node_src_props *r = &p.nodes[0].src[3];
    CHECK(r->data == NULL && r->type == LLM_TYPE_COUNT && r->ne[0] == 0 && r->ne[3] == 0 &&
          r->nb[0] == 0 && r->nb[3] == 0, "absent source record");
    CHECK(llm_graph_props_match(&p, g), "absent in both");
    fa->src[3] = src[3];
    CHECK(!llm_graph_props_match(&p, g), "src absent, then present");
    llm_graph_props_clear(&p);
    llm_graph_props_clear(&p); /* clearing twice is harmless */
    llm_graph_free(g);
    llm_ctx_free(ctx);
}

/* VIEW nodes skip the node and source address checks and nothing else; the consumer of a moved
 * view still sees the move; other no-op nodes (RESHAPE) compare their address. */
static void test_views(void)
{
    struct llm_ctx *ctx = llm_ctx_new(16);
    struct llm_tensor *x = leaf(ctx, LLM_TYPE_F32, 8, 4, 0);
    struct llm_tensor *b = leaf(ctx, LLM_TYPE_F32, 8, 2, 256);
    struct llm_tensor *v = llm_view_2d(ctx, x, 8, 2, x->nb[1], x->nb[1]);
    struct llm_graph *gv = llm_graph_build(&v, 1);
    struct llm_graph_props p;
    CHECK(gv && gv->n_nodes == 1 && gv->nodes[0] == v && v->op == LLM_OP_VIEW);
    CHECK(llm_graph_props_record(&p, gv));
    FLIP(&p, gv, v->data, true, "view address", 0, 0);
    FLIP(&p, gv, x->data, true, "view's source address", 0, 0);
    x->data = arena + 512; /* the whole tensor moves, view with it */
    v->data = arena + 512 + x->nb[1];
    CHECK(llm_graph_props_match(&p, gv), "moved view alone");
    FLIP(&p, gv, v->ne[0], false, "view ne", 0, 0);
    FLIP(&p, gv, v->nb[1], false, "view nb", 1, 0);
    FLIP(&p, gv, v->type, false, "view type", 0, 0);
    FLIP(&p, gv, v->op, false, "view op", 0, 0);
    FLIP(&p, gv, v->op_params[0], false, "view op_params", 0, 0);
    FLIP(&p, gv, x->ne[1], false, "view's source ne", 1, 0);
    FLIP(&p, gv, x->nb[1], false, "view's source nb", 1, 0);
    FLIP(&p, gv, x->type, false, "view's source type", 0, 0);
    llm_graph_props_clear(&p);

    x->data = arena;
    v->data = arena + x->nb[1];
    struct llm_tensor *y = llm_add(ctx, v, b);
    struct llm_graph *gy = llm_graph_build(&y, 1);
    place(gy, 1024);
    CHECK(gy && gy->n_nodes == 2 && gy->nodes[0] == v && gy->nodes[1] == y);
    CHECK(llm_graph_props_record(&p, gy));
    x->data = arena + 512;
    v->data = arena + 512 + x->nb[1];
    CHECK(!llm_graph_props_match(&p, gy), "consumer of a moved view");
    x->data = arena;
    v->data = arena + x->nb[1];
    CHECK(llm_graph_props_match(&p, gy), "view moved back");

    /* node count: a prefix of a recorded graph, and a longer graph, are misses */
    CHECK(!llm_graph_props_match(&p, gv), "fewer nodes");
    llm_graph_props_clear(&p);
    CHECK(llm_graph_props_record(&p, gv));
    CHECK(!llm_graph_props_match(&p, gy), "more nodes");
    llm_graph_props_clear(&p);

    struct llm_tensor *r = llm_reshape_2d(ctx, x, 4, 8);
    struct llm_graph *gr = llm_graph_build(&r, 1);
    CHECK(gr && gr->n_nodes == 1 && r->op == LLM_OP_RESHAPE && r->data == x->data);
    CHECK(llm_graph_props_record(&p, gr));
    FLIP(&p, gr, r->data, false, "reshape address", 0, 0);
    FLIP(&p, gr, x->data, false, "reshape's source address", 0, 0);
    llm_graph_props_clear(&p);
    llm_graph_free(gr);
    llm_graph_free(gy);
    llm_graph_free(gv);
    llm_ctx_free(ctx);
}

/* A graph built again (new tensor structs, same addresses and shapes) is the same graph; one
 * token more is not. */
static void test_rebuilt(void)
{
    struct llm_ctx *c1 = llm_ctx_new(64), *c2 = llm_ctx_new(64), *c3 = llm_ctx_new(64);
    struct llm_graph *g1 = build_block(c1, 1, true), *g2 = build_block(c2, 1, true);
    struct llm_graph *g3 = build_block(c3, 2, true);
    struct llm_graph_props p;
    CHECK(g1 && g2 && g3 && !llm_ctx_overflowed(c1));
    CHECK(llm_graph_props_record(&p, g1));
    CHECK_EQ_INT(p.n_nodes, g1->n_nodes);
    CHECK(g1->n_nodes >= 7, "%d nodes", g1->n_nodes);
    CHECK(llm_graph_props_match(&p, g1), "itself");
    CHECK(llm_graph_props_match(&p, g2), "rebuilt");
    CHECK(!llm_graph_props_match(&p, g3), "two tokens");
    llm_graph_props_clear(&p);
    llm_graph_free(g3);
    llm_graph_free(g2);
    llm_graph_free(g1);
    llm_ctx_free(c3);
    llm_ctx_free(c2);
    llm_ctx_free(c1);
}

/* ---- LRU ----------------------------------------------------------------------------------- */

/* The captured graphs are malloc'd ids; the callback logs and frees them, so ASan sees a leak or
 * a double destroy. */
struct destroyed {
    int ids[32];
    int n;
};

static void destroy_dummy(void *graph, void *user)
{
    struct destroyed *d = user;
    if (d->n < 32)
        d->ids[d->n] = *(int *)graph;
    d->n++;
    free(graph);
}

static struct llm_graph_entry *push(struct llm_graph_lru *c, const struct llm_graph *g, int id)
{
    struct llm_graph_entry *e = llm_graph_lru_push(c, g);
    CHECK(e != NULL);
    if (e && id >= 0) {
        int *graph = malloc(sizeof *graph);
        *graph = id;
        e->graph = graph;
    }
    return e;
}

static int id_at(struct llm_graph_lru *c, int i)
{
    struct llm_graph_entry *e = llm_graph_lru_at(c, i);
    return !e ? -2 : e->graph ? *(int *)e->graph : -1;
}

/* Entries front to back carry these ids (-1: no graph stored). */
static void check_order(struct llm_graph_lru *c, int n, const int *ids, const char *what)
{
    bool ok = llm_graph_lru_size(c) == n && !llm_graph_lru_at(c, n) && !llm_graph_lru_at(c, -1);
    for (int i = 0; i < n; i++)
        ok &= id_at(c, i) == ids[i];
    CHECK(ok, "order %s: size %d, front %d", what, llm_graph_lru_size(c), id_at(c, 0));
}

#define ORDER(c, what, ...)                                                           \
    do {                                                                              \
        const int ids_[] = { __VA_ARGS__ };                                           \
        check_order(c, (int)(sizeof ids_ / sizeof *ids_), ids_, what);                \
    } while (0)

/* Graph i: one ADD node writing at its own address. */
static void make_graphs(struct llm_ctx *ctx, struct llm_graph **gs, int n)
{
    struct llm_tensor *a = leaf(ctx, LLM_TYPE_F32, 4, 1, 0);
    struct llm_tensor *b = leaf(ctx, LLM_TYPE_F32, 4, 1, 64);
    for (int i = 0; i < n; i++) {
        struct llm_tensor *t = llm_add(ctx, a, b);
        t->data = arena + 128 + 64 * i;
        gs[i] = llm_graph_build(&t, 1);
    }
}

static void test_lru(void)
{
    struct llm_ctx *ctx = llm_ctx_new(16);
    struct llm_graph *g[6];
    make_graphs(ctx, g, 6);
    struct destroyed d = { .n = 0 };
    struct llm_graph_lru *c = llm_graph_lru_new(3, destroy_dummy, &d);
    CHECK(c && llm_graph_lru_capacity(c) == 3 && llm_graph_lru_size(c) == 0);
    CHECK(!llm_graph_lru_at(c, 0) && !llm_graph_lru_find(c, g[0]), "empty");

    struct llm_graph_entry *e0 = push(c, g[0], 0);
    CHECK(e0 && e0->props.n_nodes == 1 && llm_graph_lru_at(c, 0) == e0);
    push(c, g[1], 1);
    push(c, g[2], 2);
    ORDER(c, "after 3 pushes", 2, 1, 0);
    CHECK(llm_graph_lru_find(c, g[0]) == e0, "hit returns the pushed entry");
    ORDER(c, "after hit on the back", 0, 2, 1);
    CHECK(llm_graph_lru_find(c, g[0]) == e0);
    ORDER(c, "after hit on the front", 0, 2, 1);
    CHECK(llm_graph_lru_find(c, g[2]) != NULL);
    ORDER(c, "after hit in the middle", 2, 0, 1);
    CHECK(!llm_graph_lru_find(c, g[5]), "miss");
    ORDER(c, "after a miss", 2, 0, 1);
    CHECK(d.n == 0 && llm_graph_lru_evictions(c) == 0);

    push(c, g[3], 3); /* full: 1 at the back goes */
    ORDER(c, "after push on full", 3, 2, 0);
    CHECK(d.n == 1 && d.ids[0] == 1, "%d destroyed, first %d", d.n, d.ids[0]);
    CHECK_EQ_INT(llm_graph_lru_evictions(c), 1);
    CHECK(!llm_graph_lru_find(c, g[1]), "evicted graph misses");

    push(c, g[4], -1); /* capture not stored yet */
    ORDER(c, "after push without graph", -1, 3, 2);
    CHECK(d.n == 2 && d.ids[1] == 0 && llm_graph_lru_evictions(c) == 2);
    push(c, g[5], 5);
    ORDER(c, "after evicting 2", 5, -1, 3);
    CHECK(d.n == 3 && d.ids[2] == 2);
    CHECK(llm_graph_lru_find(c, g[3]) != NULL);
    ORDER(c, "entry without graph at the back", 3, 5, -1);
    push(c, g[0], 0); /* evicting an entry without graph destroys nothing */
    ORDER(c, "entry without graph evicted", 0, 3, 5);
    CHECK(d.n == 3 && llm_graph_lru_evictions(c) == 4, "%d destroyed", d.n);
    CHECK(!llm_graph_lru_find(c, g[4]));
    llm_graph_lru_free(c);
    unsigned rest = 0;
    for (int i = 3; i < d.n && i < 32; i++)
        rest |= 1u << d.ids[i];
    CHECK(d.n == 6 && rest == (1u << 0 | 1u << 3 | 1u << 5), "free destroys the rest: %d", d.n);
    llm_graph_lru_free(NULL);

    /* capacity 1: each push evicts the previous one */
    const int caps[] = { 1, 0, -4 };
    for (int k = 0; k < 3; k++) {
        d.n = 0;
        c = llm_graph_lru_new(caps[k], destroy_dummy, &d);
        CHECK(c && llm_graph_lru_capacity(c) == 1, "capacity %d", caps[k]);
        for (int i = 0; i < 4; i++) {
            push(c, g[i], i);
            ORDER(c, "capacity 1", i);
            CHECK(d.n == i && (i == 0 || d.ids[i - 1] == i - 1));
        }
        CHECK(llm_graph_lru_find(c, g[3]) && !llm_graph_lru_find(c, g[2]));
        CHECK_EQ_INT(llm_graph_lru_evictions(c), 3);
        llm_graph_lru_free(c);
        CHECK(d.n == 4 && d.ids[3] == 3);
    }
    for (int i = 0; i < 6; i++)
        llm_graph_free(g[i]);
    llm_ctx_free(ctx);
}

/* ---- policy -------------------------------------------------------------------------------- */

static void test_env_bool(void)
{
    static const char *const yes[] = { "on", "1", "yes", "y", "enable", "true", "ON", "Enable",
                                       "TRUE", "Yes", "Y" };
    static const char *const no[] = { "off", "0", "no", "2", "", " on", "on ", "enabled", "o",
                                      "onn", "true\n", "yes!", "false" };
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
        CHECK(llm_env_bool(yes[i]), "\"%s\"", yes[i]);
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        CHECK(!llm_env_bool(no[i]), "\"%s\"", no[i]);
    CHECK(!llm_env_bool(NULL));

    const char *name = "LLM_TEST_GRAPHCACHE_FLAG";
    unsetenv(name);
    CHECK(llm_env_flag(name, true) && !llm_env_flag(name, false), "unset: default");
    setenv(name, "Yes", 1);
    CHECK(llm_env_flag(name, false) && llm_env_flag(name, true));
    setenv(name, "off", 1);
    CHECK(!llm_env_flag(name, true) && !llm_env_flag(name, false));
    setenv(name, "", 1);
    CHECK(!llm_env_flag(name, true), "set but empty is false, not the default");
    unsetenv(name);
}

struct warnings {
    int n;
    int multiline;
    char last[512];
};

static void count_warnings(enum llm_log_level level, const char *text, void *user)
{
    struct warnings *w = user;
    if (level != LLM_LOG_WARN)
        return;
    w->n++;
    w->multiline += strchr(text, '\n') != NULL;
    snprintf(w->last, sizeof w->last, "%s", text);
}

static void test_capacity(void)
{
    struct warnings w = { 0 };
    llm_log_set_sink(count_warnings, &w);
    CHECK_EQ_INT(llm_graph_cache_capacity(NULL), LLM_GRAPH_CACHE_DEFAULT_CAPACITY);
    CHECK_EQ_INT(LLM_GRAPH_CACHE_DEFAULT_CAPACITY, 12);
    static const struct { const char *v; int want; } good[] = {
        { "12", 12 }, { "3", 3 }, { "1", 1 }, { "  7", 7 }, { "+5", 5 }, { "2147483647", 2147483647 },
    };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        CHECK_EQ_INT(llm_graph_cache_capacity(good[i].v), good[i].want);
    CHECK(w.n == 0, "%d warnings for valid values", w.n);

    static const char *const bad[] = { "0", "-3", "abc", "12abc", "99999999999999999999", "",
                                       "12 ", " ", "2147483648", "1.5", "0x10" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        w.n = 0;
        CHECK_EQ_INT(llm_graph_cache_capacity(bad[i]), 1);
        CHECK(w.n == 1, "\"%s\": %d warnings", bad[i], w.n);
        char quoted[64];
        snprintf(quoted, sizeof quoted, "\"%s\"", bad[i]);
        CHECK(strstr(w.last, "GGML_CANN_GRAPH_CACHE_CAPACITY") && strstr(w.last, quoted) &&
              strstr(w.last, "using 1"), "%s", w.last);
    }

    /* odd bytes and huge values still give one whole line */
    char huge[2048];
    memset(huge, '7', sizeof huge - 1);
    huge[sizeof huge - 1] = '\0';
    const char *odd[] = { "3\n4", "\x1b[2J", huge };
    w.n = 0;
    for (size_t i = 0; i < sizeof odd / sizeof *odd; i++) {
        CHECK_EQ_INT(llm_graph_cache_capacity(odd[i]), 1);
        CHECK(strstr(w.last, "GGML_CANN_GRAPH_CACHE_CAPACITY") && strstr(w.last, "using 1"),
              "%s", w.last);
    }
    CHECK(w.n == 3 && w.multiline == 0 && !strchr(w.last, '\x1b'), "%d warnings", w.n);
    llm_log_set_sink(NULL, NULL);
}

static void test_query_len(void)
{
    const struct { int64_t n; bool fused; } cases[] = { { 1, true }, { 7, true }, { 5, false },
                                                        { 1, false } };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct llm_ctx *ctx = llm_ctx_new(64);
        struct llm_graph *g = build_block(ctx, cases[i].n, cases[i].fused);
        CHECK(g && g->nodes[g->n_nodes - 1]->op == (cases[i].fused ? LLM_OP_FLASH_ATTN
                                                                    : LLM_OP_SOFT_MAX));
        CHECK_EQ_INT(llm_graph_query_len(g), cases[i].n);
        llm_graph_free(g);
        llm_ctx_free(ctx);
    }

    struct llm_ctx *ctx = llm_ctx_new(16);
    struct llm_tensor *a = leaf(ctx, LLM_TYPE_F32, 8, 5, 0);
    struct llm_tensor *y = llm_add(ctx, a, a);
    struct llm_graph *g = llm_graph_build(&y, 1);
    CHECK_EQ_INT(llm_graph_query_len(g), 1);
    llm_graph_free(g);

    /* a FLASH_ATTN node wins over an earlier SOFT_MAX; otherwise the first SOFT_MAX counts */
    struct llm_tensor *q = leaf(ctx, LLM_TYPE_F32, 4, 1, 256);
    struct llm_tensor *k = leaf(ctx, LLM_TYPE_F32, 4, 8, 512);
    struct llm_tensor *outs[] = { llm_soft_max(ctx, a, NULL, 1.0f),
                                  llm_soft_max(ctx, llm_new_tensor_2d(ctx, LLM_TYPE_F32, 8, 3),
                                               NULL, 1.0f),
                                  llm_flash_attn(ctx, q, k, k, NULL, 1.0f) };
    g = llm_graph_build(outs, 3);
    CHECK(g && g->n_nodes == 3 && g->nodes[2]->op == LLM_OP_FLASH_ATTN);
    CHECK_EQ_INT(llm_graph_query_len(g), 1);
    llm_graph_free(g);
    g = llm_graph_build(outs, 2);
    CHECK_EQ_INT(llm_graph_query_len(g), 5);
    llm_graph_free(g);
    struct llm_tensor *q3 = leaf(ctx, LLM_TYPE_F32, 4, 3, 768);
    outs[1] = llm_flash_attn(ctx, q3, k, k, NULL, 1.0f);
    g = llm_graph_build(&outs[1], 2); /* the first of two FLASH_ATTN nodes counts */
    CHECK(g && g->n_nodes == 2 && g->nodes[1] == outs[2]);
    CHECK_EQ_INT(llm_graph_query_len(g), 3);
    llm_graph_free(g);
    llm_ctx_free(ctx);
}

int main(void)
{
    test_node_fields();
    test_views();
    test_rebuilt();
    test_lru();
    test_env_bool();
    test_capacity();
    test_query_len();
    return test_done("test_graphcache");
}
