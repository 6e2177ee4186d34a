/* The LRU of captured graphs (src/graphcache/README.md: the LRU): a doubly linked list, front = most
 * recently used. A miss pushes a new record at the front (evicting the back one when full), a hit
 * moves its entry to the front. Entries are separate allocations so the pointers handed out stay
 * valid while other entries move, and memory follows the size, not the configured capacity. */
#include "graphcache.h"

#include <stdlib.h>

struct lru_node {
    struct llm_graph_entry entry;
    struct lru_node *prev, *next;
};

struct llm_graph_lru {
    struct lru_node *front, *back;
    int size, capacity;
    uint64_t evictions;
    llm_graph_destroy_fn destroy;
    void *user;
};

struct llm_graph_lru *llm_graph_lru_new(int capacity, llm_graph_destroy_fn destroy, void *user)
{
    struct llm_graph_lru *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->capacity = capacity < 1 ? 1 : capacity;
    c->destroy = destroy;
    c->user = user;
    return c;
}

static void unlink_node(struct llm_graph_lru *c, struct lru_node *n)
{
    if (n->prev)
        n->prev->next = n->next;
    else
        c->front = n->next;
    if (n->next)
        n->next->prev = n->prev;
    else
        c->back = n->prev;
    c->size--;
}

static void link_front(struct llm_graph_lru *c, struct lru_node *n)
{
    n->prev = NULL;
    n->next = c->front;
    if (c->front)
        c->front->prev = n;
    else
        c->back = n;
    c->front = n;
    c->size++;
}

/* The graph goes back to its owner; the record is ours. */
static void destroy_node(struct llm_graph_lru *c, struct lru_node *n)
{
    if (n->entry.graph)
        c->destroy(n->entry.graph, c->user);
    llm_graph_props_clear(&n->entry.props);
    free(n);
}

void llm_graph_lru_free(struct llm_graph_lru *c)
{
    if (!c)
        return;
    while (c->front) {
        struct lru_node *n = c->front;
        unlink_node(c, n);
        destroy_node(c, n);
    }
    free(c);
}

struct llm_graph_entry *llm_graph_lru_find(struct llm_graph_lru *c, const struct llm_graph *g)
{
    for (struct lru_node *n = c->front; n; n = n->next)
        if (llm_graph_props_match(&n->entry.props, g)) {
            if (n != c->front) {
                unlink_node(c, n);
                link_front(c, n);
            }
            return &n->entry;
        }
    return NULL;
}

struct llm_graph_entry *llm_graph_lru_push(struct llm_graph_lru *c, const struct llm_graph *g)
{
    /* record first: out of memory must leave the cache as it was */
    struct lru_node *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    if (!llm_graph_props_record(&n->entry.props, g)) {
        free(n);
        return NULL;
    }
    if (c->size >= c->capacity) {
        struct lru_node *old = c->back;
        unlink_node(c, old);
        destroy_node(c, old);
        c->evictions++;
    }
    link_front(c, n);
    return &n->entry;
}

int llm_graph_lru_size(const struct llm_graph_lru *c)
{
    return c->size;
}

int llm_graph_lru_capacity(const struct llm_graph_lru *c)
{
    return c->capacity;
}

uint64_t llm_graph_lru_evictions(const struct llm_graph_lru *c)
{
    return c->evictions;
}

struct llm_graph_entry *llm_graph_lru_at(struct llm_graph_lru *c, int i)
{
    if (i < 0 || i >= c->size)
        return NULL;
    struct lru_node *n = c->front;
    while (i-- > 0)
        n = n->next;
    return &n->entry;
}
