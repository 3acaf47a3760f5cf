/* The top-level keys of a YAML file and their lines, from libyaml's events. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "yaml_index.h"

static CtStatus add_key(YamlIndex *ix, int *cap, const yaml_event_t *ev)
{
    if (ix->n == *cap) {
        int c = *cap ? 2 * *cap : 16;
        YamlKey *k = realloc(ix->keys, (size_t)c * sizeof *k);
        if (!k) return ct_error(CT_ERR_OOM, "reading YAML: out of memory");
        ix->keys = k;
        *cap = c;
    }
    YamlKey *k = &ix->keys[ix->n++];
    snprintf(k->key, sizeof k->key, "%s", (const char *)ev->data.scalar.value);
    k->value[0] = '\0';
    k->line = (int)ev->start_mark.line + 1;
    return CT_OK;
}

static void set_value(YamlKey *k, const yaml_event_t *ev)
{
    switch (ev->type) {
    case YAML_SCALAR_EVENT:
        snprintf(k->value, sizeof k->value, "'%.80s'",
                 (const char *)ev->data.scalar.value);
        break;
    case YAML_SEQUENCE_START_EVENT:
        snprintf(k->value, sizeof k->value, "a sequence");
        break;
    case YAML_MAPPING_START_EVENT:
        snprintf(k->value, sizeof k->value, "a mapping");
        break;
    default: snprintf(k->value, sizeof k->value, "an alias"); break;
    }
}

/* Walks the event stream. depth counts open collections; at depth 1 (the
 * top mapping) scalars alternate key, value. A second document is an error:
 * libcyaml would read the first one only and ignore the rest. */
static CtStatus walk(yaml_parser_t *p, const char *path, YamlIndex *ix)
{
    int depth = 0, cap = 0, documents = 0;
    bool want_key = true;
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(p, &ev))
            return ct_error(CT_ERR_FORMAT, "%s:%d: YAML syntax error: %s", path,
                            (int)p->problem_mark.line + 1,
                            p->problem ? p->problem : "unreadable");
        CtStatus st = CT_OK;
        bool start =
            ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT;
        bool end =
            ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT;
        if (ev.type == YAML_DOCUMENT_START_EVENT && ++documents > 1)
            st = ct_error(CT_ERR_FORMAT,
                          "%s:%d: a second YAML document ('---'): a config file holds "
                          "one",
                          path, (int)ev.start_mark.line + 1);
        else if (depth == 0 &&
                 (ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_SCALAR_EVENT))
            st = ct_error(CT_ERR_FORMAT,
                          "%s:%d: expected a mapping of keys to values at the top level",
                          path, (int)ev.start_mark.line + 1);
        else if (depth == 1 && want_key && ev.type == YAML_SCALAR_EVENT)
            st = add_key(ix, &cap, &ev);
        else if (depth == 1 && !want_key && ix->n > 0)
            set_value(&ix->keys[ix->n - 1], &ev);
        if (depth == 1 &&
            (start || ev.type == YAML_SCALAR_EVENT || ev.type == YAML_ALIAS_EVENT))
            want_key = !want_key;
        depth += start ? 1 : end ? -1 : 0;
        bool done = ev.type == YAML_STREAM_END_EVENT;
        yaml_event_delete(&ev);
        if (st != CT_OK) return st;
        if (done) return CT_OK;
    }
}

CtStatus yaml_index_build(const char *name, const char *text, size_t size, YamlIndex *ix)
{
    *ix = (YamlIndex){0};
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        return ct_error(CT_ERR_OOM, "reading %s: out of memory", name);
    yaml_parser_set_input_string(&p, (const unsigned char *)text, size);
    CtStatus st = walk(&p, name, ix);
    yaml_parser_delete(&p);
    if (st != CT_OK) yaml_index_free(ix);
    return st;
}

void yaml_index_free(YamlIndex *ix)
{
    free(ix->keys);
    *ix = (YamlIndex){0};
}

int yaml_index_line(const YamlIndex *ix, const char *key, int n)
{
    int line = 1;
    for (int i = 0; i < ix->n; i++) {
        if (strcmp(ix->keys[i].key, key) != 0) continue;
        line = ix->keys[i].line;
        if (n-- == 0) break;
    }
    return line;
}

const char *yaml_index_value(const YamlIndex *ix, const char *key)
{
    for (int i = 0; i < ix->n; i++)
        if (strcmp(ix->keys[i].key, key) == 0) return ix->keys[i].value;
    return "the value";
}
