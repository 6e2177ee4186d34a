#include "sampler.h"

#include <math.h>
#include <stdlib.h>

/* mt19937: 32-bit Mersenne Twister, so seeded runs are reproducible across platforms. */
struct mt19937 {
    uint32_t mt[624];
    int idx;
};

static void mt_seed(struct mt19937 *m, uint32_t seed)
{
    m->mt[0] = seed;
    for (int i = 1; i < 624; i++)
        m->mt[i] = 1812433253u * (m->mt[i - 1] ^ (m->mt[i - 1] >> 30)) + (uint32_t)i;
    m->idx = 624;
}

static uint32_t mt_next(struct mt19937 *m)
{
    if (m->idx >= 624) {
        for (int i = 0; i < 624; i++) {
            uint32_t y = (m->mt[i] & 0x80000000u) | (m->mt[(i + 1) % 624] & 0x7fffffffu);
            m->mt[i] = m->mt[(i + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
        }
        m->idx = 0;
    }
    uint32_t y = m->mt[m->idx++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

struct cand {
    int32_t id;
    float logit;
    float p;
};

struct llm_sampler {
    struct llm_sampler_params p;
    int32_t n_vocab;
    struct cand *cands;
    int32_t *history;    /* ring of the last repeat_last_n tokens */
    int32_t n_history;
    int32_t history_pos;
    int32_t *banned, n_banned;
    struct mt19937 rng;
};

struct llm_sampler_params llm_sampler_default_params(void)
{
    return (struct llm_sampler_params){
        .temp = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f,
        .repeat_penalty = 1.0f, .repeat_last_n = 64, .seed = 0,
    };
}

struct llm_sampler *llm_sampler_new(const struct llm_sampler_params *p, int32_t n_vocab)
{
    struct llm_sampler *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->p = *p;
    if (s->p.repeat_last_n < 0)
        s->p.repeat_last_n = 0;
    s->n_vocab = n_vocab;
    s->cands = malloc((size_t)n_vocab * sizeof *s->cands);
    s->history = malloc(((size_t)s->p.repeat_last_n + 1) * sizeof *s->history);
    if (!s->cands || !s->history) {
        llm_sampler_free(s);
        return NULL;
    }
    mt_seed(&s->rng, p->seed);
    return s;
}

void llm_sampler_free(struct llm_sampler *s)
{
    if (!s)
        return;
    free(s->cands);
    free(s->history);
    free(s->banned);
    free(s);
}

void llm_sampler_accept(struct llm_sampler *s, int32_t token)
{
    if (s->p.repeat_last_n == 0)
        return;
    s->history[s->history_pos] = token;
    s->history_pos = (s->history_pos + 1) % s->p.repeat_last_n;
    if (s->n_history < s->p.repeat_last_n)
        s->n_history++;
}

bool llm_sampler_ban(struct llm_sampler *s, const int32_t *tokens)
{
    int32_t n = 0;
    while (tokens && tokens[n] >= 0)
        n++;
    int32_t *b = malloc(((size_t)n + 1) * sizeof *b);
    if (!b)
        return false;
    free(s->banned);
    s->banned = b;
    s->n_banned = 0;
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < s->n_vocab)
            s->banned[s->n_banned++] = tokens[i];
    return true;
}

int32_t llm_argmax(const float *x, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

/* Descending by logit, ties to the lower id (a total order, so results are deterministic). */
static int cmp_desc(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    if (x->logit != y->logit)
        return x->logit < y->logit ? 1 : -1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Keep the k best candidates, sorted descending. Quickselect first so large vocabularies only
 * sort k entries. */
static int32_t keep_top_k(struct cand *c, int32_t n, int32_t k)
{
    if (k <= 0 || k >= n) {
        qsort(c, (size_t)n, sizeof *c, cmp_desc);
        return n;
    }
    int32_t lo = 0, hi = n - 1;
    while (lo < hi) {
        struct cand pivot = c[(lo + hi) / 2];
        int32_t i = lo, j = hi;
        while (i <= j) {
            while (cmp_desc(&c[i], &pivot) < 0)
                i++;
            while (cmp_desc(&c[j], &pivot) > 0)
                j--;
            if (i <= j) {
                struct cand t = c[i];
                c[i++] = c[j];
                c[j--] = t;
            }
        }
        if (k - 1 <= j)
            hi = j;
        else if (k - 1 >= i)
            lo = i;
        else
            break;
    }
    qsort(c, (size_t)k, sizeof *c, cmp_desc);
    return k;
}

/* Softmax over the (sorted) candidates' logits into p. */
static void softmax(struct cand *c, int32_t n)
{
    const float max = c[0].logit;
    double sum = 0;
    for (int32_t i = 0; i < n; i++) {
        c[i].p = expf(c[i].logit - max);
        sum += c[i].p;
    }
    for (int32_t i = 0; i < n; i++)
        c[i].p = (float)(c[i].p / sum);
}

static void apply_repeat_penalty(struct llm_sampler *s)
{
    if (s->p.repeat_penalty == 1.0f)
        return;
    for (int32_t h = 0; h < s->n_history; h++) {
        int32_t id = s->history[h];
        if (id < 0 || id >= s->n_vocab)
            continue;
        struct cand *c = &s->cands[id];
        if (c->p != 0.0f)
            continue; /* each distinct token is penalised once */
        c->p = 1.0f;
        c->logit = c->logit > 0 ? c->logit / s->p.repeat_penalty : c->logit * s->p.repeat_penalty;
    }
}

int32_t llm_sampler_sample(struct llm_sampler *s, const float *logits)
{
    struct cand *c = s->cands;
    int32_t n = s->n_vocab;
    for (int32_t i = 0; i < n; i++)
        c[i] = (struct cand){ i, logits[i], 0.0f };
    for (int32_t i = 0; i < s->n_banned; i++)
        c[s->banned[i]].logit = -INFINITY;
    apply_repeat_penalty(s);
    if (s->p.temp <= 0.0f) {
        int32_t best = 0;
        for (int32_t i = 1; i < n; i++)
            if (c[i].logit > c[best].logit)
                best = i;
        return c[best].id;
    }
    n = keep_top_k(c, n, s->p.top_k);
    if (s->p.top_p < 1.0f) {
        softmax(c, n);
        double cum = 0;
        for (int32_t i = 0; i < n; i++) {
            cum += c[i].p;
            if (cum >= s->p.top_p) {
                n = i + 1;
                break;
            }
        }
    }
    if (s->p.min_p > 0.0f) {
        const float floor = c[0].logit + logf(s->p.min_p);
        int32_t keep = 1;
        while (keep < n && c[keep].logit >= floor)
            keep++;
        n = keep;
    }
    for (int32_t i = 0; i < n; i++)
        c[i].logit /= s->p.temp;
    softmax(c, n);
    /* u in [0, 1) with 32 random bits, then the first candidate whose running sum reaches it */
    const double u = mt_next(&s->rng) / 4294967296.0;
    double cum = 0;
    for (int32_t i = 0; i < n; i++) {
        cum += c[i].p;
        if (cum > u)
            return c[i].id;
    }
    return c[n - 1].id;
}
