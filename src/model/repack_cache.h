#ifndef LLM_REPACK_CACHE_H
#define LLM_REPACK_CACHE_H

/* A cache on disk of the model's repacked memory (repack_load.c), so that a later load of the same
 * GGUF file maps the repacked weights from the page cache, as a plain load maps the file, instead
 * of copying them again (src/model/README.md#the-repack-cache).
 *
 * LLM_REPACK_CACHE names the directory; unset, it is $XDG_CACHE_HOME/llm/repack or
 * $HOME/.cache/llm/repack; "0" or "off" turns the cache off. An entry belongs to one file (its
 * device, inode, size and modification time) and one layout: the places and layouts repack_load.c
 * gives the tensors on this CPU, and a fingerprint of the repack code's output. Anything that does
 * not match is a miss. Every failure (no directory, a full disk, a damaged entry) is a miss or a
 * save not made, reported with -v: the cache never stops a load. */

#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

/* The entry for file f and layout hash `layout` (of `bytes` bytes of repacked memory) mapped
 * read-only, or NULL on a miss. The caller unmaps it with munmap(mem, bytes). */
void *repack_cache_map(const struct gguf_file *f, uint64_t layout, size_t bytes);

/* Writes mem (the repacked memory, `bytes` bytes) as the entry for f and layout: to a temporary
 * file, synced, then renamed, so an entry is whole or absent. Removes the entries of earlier
 * versions of this file and of files that are gone. */
void repack_cache_save(const struct gguf_file *f, uint64_t layout, const void *mem, size_t bytes);

#endif
