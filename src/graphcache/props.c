/* Node property records of a captured graph and the test whether a new graph is the same one
 * (src/graphcache/README.md: the record and the match): a replayed graph reuses every launch
 * argument frozen at capture, so anything a kernel reads from the node — addresses, op, types,
 * shapes, strides, op params of the node and of each source — must be equal. VIEW nodes alone skip
 * the address checks: they launch nothing, and any consumer of a moved view still compares its own
 * source address. */
#include "graphcache.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"

static void record_src(struct llm_node_src_props *r, const struct llm_tensor *s)
{
    if (!s) {
        *r = (struct llm_node_src_props){ .data = NULL, .type = LLM_TYPE_COUNT };
        return;
    }
    r->data = s->data;
    r->type = (int)s->type;
    memcpy(r->ne, s->ne, sizeof r->ne);
    memcpy(r->nb, s->nb, sizeof r->nb);
}

static void record_node(struct llm_node_props *r, const struct llm_tensor *t)
{
    r->data = t->data;
    r->op = (int)t->op;
    r->type = (int)t->type;
    memcpy(r->ne, t->ne, sizeof r->ne);
    memcpy(r->nb, t->nb, sizeof r->nb);
    for (int s = 0; s < LLM_MAX_SRC; s++)
        record_src(&r->src[s], t->src[s]);
    memcpy(r->op_params, t->op_params, sizeof r->op_params);
}

bool llm_graph_props_record(struct llm_graph_props *p, const struct llm_graph *g)
{
    p->n_nodes = 0;
    p->nodes = llm_calloc((size_t)g->n_nodes, sizeof *p->nodes);
    if (!p->nodes)
        return false;
    p->n_nodes = g->n_nodes;
    for (int i = 0; i < g->n_nodes; i++)
        record_node(&p->nodes[i], g->nodes[i]);
    return true;
}

void llm_graph_props_clear(struct llm_graph_props *p)
{
    free(p->nodes);
    p->nodes = NULL;
    p->n_nodes = 0;
}

static bool same_shape(const int64_t *ne_a, const size_t *nb_a, const struct llm_tensor *t)
{
    return memcmp(ne_a, t->ne, sizeof t->ne) == 0 && memcmp(nb_a, t->nb, sizeof t->nb) == 0;
}

/* The absent marker is the type, not the address: a VIEW's source address is not compared, and a
 * present source may not have data yet. */
static bool src_matches(const struct llm_node_src_props *r, const struct llm_tensor *s,
                        bool check_address)
{
    if (!s)
        return r->type == LLM_TYPE_COUNT;
    return r->type == (int)s->type && (!check_address || r->data == s->data) &&
           same_shape(r->ne, r->nb, s);
}

static bool node_matches(const struct llm_node_props *r, const struct llm_tensor *t)
{
    const bool check_address = t->op != LLM_OP_VIEW;
    if ((check_address && r->data != t->data) || r->op != (int)t->op || r->type != (int)t->type ||
        !same_shape(r->ne, r->nb, t))
        return false;
    for (int s = 0; s < LLM_MAX_SRC; s++)
        if (!src_matches(&r->src[s], t->src[s], check_address))
            return false;
    return memcmp(r->op_params, t->op_params, sizeof r->op_params) == 0;
}

bool llm_graph_props_match(const struct llm_graph_props *p, const struct llm_graph *g)
{
    if (p->n_nodes != g->n_nodes)
        return false;
    for (int i = 0; i < g->n_nodes; i++)
        if (!node_matches(&p->nodes[i], g->nodes[i]))
            return false;
    return true;
}
