/* Private to runtime/: where each top-level key of a YAML file is, so that
 * config errors name FILE:LINE even where libcyaml reports no line (unknown
 * and repeated keys, values rejected after loading). */
#ifndef CTRAINER_YAML_INDEX_H
#define CTRAINER_YAML_INDEX_H

#include <stddef.h>

#include "ctrainer/status.h"

typedef struct YamlKey {
    char key[64];
    char value[96]; /* "'text'", "a sequence", "a mapping" */
    int line;       /* 1-based line of the key */
} YamlKey;

typedef struct YamlIndex {
    YamlKey *keys; /* in file order */
    int n;
} YamlIndex;

/* Parses text (size bytes, the file `name`) with libyaml. CT_ERR_FORMAT
 * "NAME:LINE: ..." for a YAML syntax error or a top level that is not a
 * mapping. Free with yaml_index_free. */
CtStatus yaml_index_build(const char *name, const char *text, size_t size, YamlIndex *ix);
void yaml_index_free(YamlIndex *ix);
/* Line of the n-th (0-based) occurrence of key, else of its last one, else
 * 1. */
int yaml_index_line(const YamlIndex *ix, const char *key, int n);
/* The first value of key as text for messages ("'abc'", "a sequence"). */
const char *yaml_index_value(const YamlIndex *ix, const char *key);

#endif
