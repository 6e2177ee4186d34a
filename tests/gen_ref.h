/* A llama.cpp reference case of ../shared/ref/<dir> (gen, kvq; see ../shared/ref/README.md): the
 * JSON's prompt and greedy ids and its logits file, with the logits' range. For tests/test_gen.c
 * and tests/test_kvq.c. */
#ifndef LLM_TEST_GEN_REF_H
#define LLM_TEST_GEN_REF_H

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

struct ref {
    cJSON *json;
    const char *name;      /* file name of the case                    */
    const char *model;
    int32_t *prompt;
    int n_prompt;
    int32_t *greedy;
    int n_greedy;
    float *logits;         /* rows x n_vocab                            */
    int rows;              /* n_prompt ("all") or 1 ("last")           */
    int n_vocab;
    float range;
};

static int32_t *int_array(cJSON *arr, int *n)
{
    *n = cJSON_GetArraySize(arr);
    int32_t *out = malloc(((size_t)*n + 1) * sizeof *out);
    for (int i = 0; i < *n; i++)
        out[i] = (int32_t)cJSON_GetArrayItem(arr, i)->valuedouble;
    return out;
}

static bool load_ref(const char *dir, const char *file, struct ref *r)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/ref/%s/%s", test_shared(), dir, file);
    char *text = test_read_file(path, NULL);
    if (!text)
        return false;
    r->json = cJSON_Parse(text);
    free(text);
    if (!r->json)
        return false;
    r->name = file;
    r->model = cJSON_GetObjectItem(r->json, "model")->valuestring;
    r->prompt = int_array(cJSON_GetObjectItem(r->json, "prompt_ids"), &r->n_prompt);
    r->greedy = int_array(cJSON_GetObjectItem(r->json, "greedy_ids"), &r->n_greedy);
    r->n_vocab = cJSON_GetObjectItem(r->json, "n_vocab")->valueint;
    r->rows = strcmp(cJSON_GetObjectItem(r->json, "logits_rows")->valuestring, "all") == 0 ? r->n_prompt : 1;
    snprintf(path, sizeof path, "%s/ref/%s/%s", test_shared(), dir, cJSON_GetObjectItem(r->json, "logits")->valuestring);
    size_t len = 0;
    r->logits = (float *)test_read_file(path, &len);
    if (!r->logits || len != (size_t)r->rows * (size_t)r->n_vocab * sizeof(float))
        return false;
    float lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < (size_t)r->rows * (size_t)r->n_vocab; i++) {
        lo = fminf(lo, r->logits[i]);
        hi = fmaxf(hi, r->logits[i]);
    }
    r->range = hi - lo;
    return true;
}

static void free_ref(struct ref *r)
{
    cJSON_Delete(r->json);
    free(r->prompt);
    free(r->greedy);
    free(r->logits);
}


static int ref_name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The .json cases of ../shared/ref/<dir> whose names do not contain skip (NULL: none), sorted, at
 * most cap (the caller frees each); -1 when the folder cannot be read. */
static int list_refs(const char *dir, const char *skip, char **names, int cap)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/ref/%s", test_shared(), dir);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < cap) {
        size_t l = strlen(de->d_name);
        if (l > 5 && !strcmp(de->d_name + l - 5, ".json") && !(skip && strstr(de->d_name, skip)))
            names[n++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, ref_name_cmp);
    return n;
}

#endif
